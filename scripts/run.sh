#!/usr/bin/env bash
# Sets up a fresh machine and starts the dashboard on http://localhost:8501 (the README's run command).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
exec .venv/bin/python -m streamlit run serve.py "$@"

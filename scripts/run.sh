#!/usr/bin/env bash
# Sets up a fresh machine and starts the dashboard on http://localhost:8501 (the README's run command).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
ensure_venv requirements.txt  # once; a later start installs nothing (scripts/venv.sh)
exec .venv/bin/python -m streamlit run serve.py "$@"

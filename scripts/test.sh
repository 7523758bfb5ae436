#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite (the README's test command; CI runs it).
# Ray (requirements-ray.txt, optional for the app) is installed so the sweep tests run on a real cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's chromium drives the browser tests (Playwright cannot download browsers here).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt -r requirements-dev.txt -r requirements-ray.txt
exec .venv/bin/python -m pytest "$@"

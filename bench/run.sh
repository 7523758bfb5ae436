#!/usr/bin/env bash
# The whole benchmark in one command: sets up the peer venv if it is missing, then runs `python -m bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bench/.venv-peer/bin/python ] || bash bench/setup_peer.sh
exec .venv/bin/python -m bench "$@"

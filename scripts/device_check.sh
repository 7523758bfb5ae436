#!/usr/bin/env bash
# The device check (issue 15, docs/device.md): one line each for the environment, training, a 2^20
# evaluation, a device-trained run loaded without a GPU, and the gpu-marked tests. Under 5 minutes on one GPU.
#   scripts/device_check.sh                 # DEVICE=auto: CUDA, then MPS, then the CPU
#   DEVICE=cpu scripts/device_check.sh      # a dry run: the CPU stands in for the device, at smaller sizes
# Exit status 1 when a line says FAIL. The work is bench/device_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
# cuBLAS is deterministic only with a fixed workspace (torch's deterministic algorithms ask for it)
export CUBLAS_WORKSPACE_CONFIG="${CUBLAS_WORKSPACE_CONFIG:-:4096:8}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m bench.device_check --device "${DEVICE:-auto}" "$@"

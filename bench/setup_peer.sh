#!/usr/bin/env bash
# The peer (TransformerLens) in its own environment: never a dependency of the app.
# HookedTransformer was removed in TransformerLens 4.0, so the last 3.x release is pinned.
set -euo pipefail
cd "$(dirname "$0")/.."
PEER=bench/.venv-peer
TRANSFORMER_LENS="${TRANSFORMER_LENS:-transformer-lens==3.9.0}"
[ -x "$PEER/bin/python" ] || python3 -m venv "$PEER"
# torch first (the CPU build already on disk), then TransformerLens held to that torch.
"$PEER/bin/pip" install --quiet torch==2.13.0
"$PEER/bin/pip" install --quiet -c bench/peer-constraints.txt "$TRANSFORMER_LENS"
"$PEER/bin/python" -W ignore -c "import torch, importlib.metadata as m; from transformer_lens import HookedTransformer; \
print('peer ready: torch', torch.__version__, 'transformer-lens', m.version('transformer-lens'))"

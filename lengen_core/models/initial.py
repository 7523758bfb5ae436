"""The weights a training of a config starts from: its seed's random initialisation, or for init
constructed the hand-built relative-rule head (lengen_core.models.construct). The untrained
baseline every analysis may compare a run with, so it lives with the models, below training."""

from __future__ import annotations

import torch

from lengen_core.config import RunConfig
from lengen_core.models.construct import construct
from lengen_core.models.head import build_model


def initial_model(config: RunConfig) -> torch.nn.Module:
    """The weights a training of `config` starts from: its seed's random initialisation, or for init
    constructed the hand-built relative-rule head (lengen_core.models.construct)."""
    model = build_model(config, torch.Generator().manual_seed(config.train.seed))
    return construct(model, config) if config.train.init == "constructed" else model

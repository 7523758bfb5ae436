"""Runs that continue other runs: "train longer".

A stored run is trained further as a new run whose config names it (`train.continues`): the same task
and model, started from the stored weights instead of the seed's initialisation, with keep_training on
so it goes on past 100% training accuracy (where the horizon still moves). The optimiser starts
afresh (Adam's moments are not stored), and the batches are those of the run's seed, as for any run.
Its own history starts at step 1; its first loss is the stored run's last loss within batch noise.
"""

from __future__ import annotations

import torch

from lengen.store import RunStore, StoreError, preset_store
from lengen_core.config import ConfigError, RunConfig, TrainConfig, with_changes
from lengen_core.training import Run


def continuation(parent: RunConfig, steps: int | None = None) -> RunConfig:
    """The config of a run that trains `parent`'s stored weights `steps` more steps (default: as many as
    the parent was given, or the default steps for a parent built by hand and never trained)."""
    steps = steps if steps is not None else parent.train.steps or TrainConfig().steps
    return with_changes(parent, steps=steps, keep_training=True, init="random", continues=parent.run_id())


def parent_run(config: RunConfig, store: RunStore) -> Run | None:
    """The stored run `config` continues (None when it continues none), from `store` or the presets.

    `StoreError` when it is not stored here; `ConfigError` when its task or model differ, since the
    weights would not fit the model or would be trained on another task."""
    run_id = config.train.continues
    if not run_id:
        return None
    for candidate in (store, preset_store()):
        if candidate.exists(run_id):
            parent = candidate.load(run_id)
            break
    else:
        raise StoreError(f"run {run_id} is not stored here, so there is nothing to continue: train it first")
    for section in ("task", "model"):
        mine, theirs = getattr(config, section), getattr(parent.config, section)
        if mine != theirs:
            changed = ", ".join(f"{name} {getattr(theirs, name)!r} → {getattr(mine, name)!r}"
                                for name in vars(mine) if getattr(mine, name) != getattr(theirs, name))
            raise ConfigError(f"a run that continues {run_id} keeps its {section}; this one changes {changed}")
    return parent


def starting_weights(config: RunConfig, store: RunStore) -> dict[str, torch.Tensor] | None:
    """The weights a training of `config` starts from when it continues a stored run, else None."""
    parent = parent_run(config, store)
    if parent is None:
        return None
    return {name: tensor.detach().cpu().clone() for name, tensor in parent.model.state_dict().items()}

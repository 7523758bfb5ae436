"""Runs for a script: list them, open one, train one (lengen.api re-exports these)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lengen.first_visit import from_dict, save_run
from lengen.lineage import continuation, starting_weights
from lengen.runtime import device_setting
from lengen.store import PRESET_ROOT, RunStore, RunSummary, StoreError, preset_store
from lengen_core.config import RunConfig, with_changes
from lengen_core.measure import Shipped
from lengen_core.training import Progress as TrainingProgress
from lengen_core.training import Run, Training, resolve_device

RunLike = Run | str  # a run, or the id of a stored one


def runs(store: RunStore | None = None) -> list[RunSummary]:
    """Every run a script can open: the person's store (newest first), then the presets it does not hold."""
    mine = own_store(store)
    own = mine.list_runs()
    held = {summary.run_id for summary in own}
    return [*own, *(summary for summary in preset_store().list_runs() if summary.run_id not in held)]


def load(run_id: str, store: RunStore | None = None, device: str | None = None) -> Run:
    """The stored run `run_id` (the person's store first, then the presets), on `device` (None: the app's,
    `$LENGEN_DEVICE`, auto by default: CUDA, then MPS, then the CPU), ready to read: eval mode, no gradients."""
    mine = own_store(store)
    for source in (mine, preset_store()):
        if source.exists(run_id):
            return _readable(source.load(run_id, _device(device)))
    raise StoreError(f"no run named {run_id} in {mine.root} or in the presets ({PRESET_ROOT}): api.runs() lists "
                     "them, api.train(config) makes one")


def train(config: RunConfig | None = None, *, store: RunStore | None = None, device: str | None = None,
          retrain: bool = False, save: bool = True, progress: Callable[[TrainingProgress], None] | None = None,
          **settings: Any) -> Run:
    """A run of `config` (default: the lab's default config) with `settings` changed, by the config's flat names
    (encoding, offset, steps, d_model, ... as lengen_core.config.with_changes takes them). A run of that config
    stored already (the person's or a preset) is returned as it is, unless `retrain`; else it is trained on
    `device` (None: the app's), `progress` hearing every step, and with `save` stored in `store` (default
    `$LENGEN_HOME`) with the numbers the app's pages open it with (lengen.first_visit.save_run, as the command
    line's `train` and the Train page do; `LENGEN_MEASURE_ON_SAVE=0` leaves them out)."""
    config = with_changes(config or RunConfig(), **settings)
    mine, target = own_store(store), _device(device)
    if not retrain:
        found = mine.find(config, target) or preset_store().find(config, target)
        if found is not None:
            return _readable(found)
    if save:
        mine.check_can_save(config)  # a read-only, full or over-quota store is found before the training
    training = Training(config, target, starting_weights(config, mine))
    for step in training:
        if progress is not None:
            progress(step)
    run = training.finish()
    if save and (saved := save_run(mine, run, replace=retrain)) != run.run_id:  # stored under the steps it ran
        return load(saved, mine, device)
    return _readable(run)


def train_longer(run: RunLike, steps: int | None = None, *, store: RunStore | None = None, **options: Any) -> Run:
    """"Train longer": a new run that starts from `run`'s stored weights and trains `steps` more (default: as
    many as it was given), on past 100% training accuracy (lengen.lineage.continuation); `options` as `train`'s.
    The run continued must be stored (its id is part of the new run's config)."""
    return train(continuation(as_run(run, store).config, steps), store=store, **options)


def own_store(store: RunStore | None) -> RunStore:
    """`store`, or the person's (`$LENGEN_HOME`, default ~/.lengen)."""
    return store if store is not None else RunStore()


def as_run(run: RunLike, store: RunStore | None) -> Run:
    return load(run, store) if isinstance(run, str) else run


def stored_data(run_id: str, store: RunStore | None) -> dict[str, Any] | None:
    """What the run was stored with for its first visits (lengen.first_visit), the person's or a preset's."""
    mine = own_store(store)
    return (mine if mine.exists(run_id) else preset_store()).first_visit(run_id)


def shipped(run: Run, store: RunStore | None) -> Shipped | None:
    """The numbers the run was stored with, as lengen_core.measure takes them back (only where they answer
    exactly the question asked, so reading them changes no number)."""
    return from_dict(stored_data(run.run_id, store))


def _device(device: str | None) -> str:
    return str(resolve_device(device or device_setting()))


def _readable(run: Run) -> Run:
    run.model.eval()
    run.model.requires_grad_(False)  # a script reads the run; no analysis needs its gradients
    return run

"""How fast this machine trains, measured: a few timed steps of two small reference runs, once per process
and device, against what the cost model (`lengen_core.serving.budget.step_seconds`) says they take.

    speed = training_speed(config, "cpu")          # measured / modelled step time for config's kind
    cost = training_cost(config, pace, speed)      # its seconds are now this machine's

The model's constants are those of a busy 2-core CPU, so on its own it can be several times off (the
default single head: modelled 17 ms a step, 7-10 ms measured on one thread; a two-layer transformer:
modelled 0.5 s, 0.1 s measured). The model's shape (how the time grows with width, length and layers)
is kept, and its scale is measured here: one factor for the single head, one for a transformer, each
the fastest of `TIMED_STEPS` steps after `WARM_STEPS` untimed ones (a first step loads what torch
loads lazily). Measured in the process that asks, at its torch thread count, while whatever else runs
on the machine runs: a busy machine measures slower, as its trainings will be; measured again every
`REMEASURE_SECONDS`, as the load changes. A measurement taken while the server starts (its training
process importing torch) can be several times slow, so the trainings themselves correct it: the pool
reports each training's own step time after `OBSERVED_STEPS` steps (`observe`), and that is the speed
for its kind of model from then on, until it is measured again.
"""

from __future__ import annotations

import threading
import time

from lengen_core.config import RunConfig, with_changes
from lengen_core.serving.budget import step_seconds
from lengen_core.training import Training

WARM_STEPS, TIMED_STEPS = 3, 5  # the fastest timed step: a burst of other work slows some, not all
REMEASURE_SECONDS = 600.0  # a measurement this old is taken again (~0.3 s): the machine's load changes
OBSERVED_STEPS = 30  # a training reports its own step time after this many steps (`observe`)
REFERENCES = {  # one per kind of model: the default single head (10 ms a step), a one-layer transformer (~40 ms)
    "single head": RunConfig(),
    "transformer": with_changes(RunConfig(), task="shift", n_layers=1, n_heads=2),
}


def _kind(config: RunConfig) -> str:
    return "single head" if config.single_head else "transformer"


def measured_step_seconds(config: RunConfig, device: str, warm: int = WARM_STEPS, timed: int = TIMED_STEPS) -> float:
    """The fastest of `timed` steps of `config` on `device`, after `warm` untimed ones."""
    training = Training(with_changes(config, steps=warm + timed, keep_training=True, continues=""), device)
    times, before = [], 0.0
    for progress in training:
        times.append(progress.elapsed_seconds - before)
        before = progress.elapsed_seconds
    return min(times[warm:])


_measured: dict[tuple[str, str], tuple[float, float]] = {}  # (kind, device) -> (time.monotonic() when, speed)
_sources: dict[tuple[str, str], str] = {}  # (kind, device) -> where its speed came from, in words
_lock = threading.Lock()


def speed_source(config: RunConfig, device: str = "auto") -> str:
    """Where the speed for `config`'s kind came from: 'a timed reference run' or "this server's last training"."""
    return _sources.get((_kind(config), device), "a timed reference run")


def training_speed(config: RunConfig, device: str = "auto", now: float | None = None) -> float:
    """This machine's step time over the model's for `config`'s kind of model (below 1: faster than the
    model's busy 2-core CPU), measured on `device` when a process first asks and again once the last
    measurement is `REMEASURE_SECONDS` old (how busy the machine is changes)."""
    key, now = (_kind(config), device), time.monotonic() if now is None else now
    with _lock:
        if key in _measured and now - _measured[key][0] < REMEASURE_SECONDS:
            return _measured[key][1]
        _sources[key] = "a timed reference run"
        reference = REFERENCES[key[0]]
        speed = measured_step_seconds(reference, device) / step_seconds(reference)
        _measured[key] = (now, speed)
        return speed


def observe(config: RunConfig, seconds_per_step: float, device: str = "auto", now: float | None = None) -> None:
    """A training of `config` on `device` took `seconds_per_step` a step (as trainings run on this server:
    in their process, at their thread count): the speed for its kind of model from now on."""
    if seconds_per_step > 0:
        with _lock:
            _sources[_kind(config), device] = "this server's last training"
            _measured[_kind(config), device] = (time.monotonic() if now is None else now,
                                                seconds_per_step / step_seconds(config))

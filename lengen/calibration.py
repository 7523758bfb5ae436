"""How fast trainings run where they run, measured there: a few timed steps of two small reference runs
in the training process (or Ray Trainer) as it warms up, against what the cost model
(`lengen.budget.step_seconds`) says they take.

    speeds = measure_references("cpu")             # in the training process: kind -> measured / modelled
    record(speeds, "cpu")                          # in the pool's process, with the warm-up's answer
    speed = training_speed(config, "cpu")          # Speed(factor, source, old), None until recorded
    cost = training_cost(config, pace, speed.factor)  # its seconds are now those of the trainings' machine

The model's constants are those of a busy 2-core CPU, so on its own it can be several times off (the
default single head: modelled 17 ms a step, 7-10 ms measured on one thread; a two-layer transformer:
modelled 0.5 s, 0.1 s measured). The model's shape (how the time grows with width, length and layers)
is kept, and its scale is measured: one factor for the single head, one for a transformer, each the
fastest of `TIMED_STEPS` steps after `WARM_STEPS` untimed ones (a first step loads what torch loads
lazily). Measured where the trainings run, at their torch thread count, while whatever else runs
there runs: the pool's training process right after its warm-up step (`TrainingPool`), or the Ray
Trainer of a cluster's pool, never the server's script thread. There it cost 2 CPU s with the
interpreter lock held (the process's first `torch.optim` optimizer imports `torch._dynamo`), and on a
Ray cluster it timed the wrong machine. Until the first measurement arrives (a cold server's first
seconds) there is none: the form says so. Measured again when the last is `REMEASURE_SECONDS` old
(the pool asks its idle training process), as the load changes; and each training reports its own
step time after `OBSERVED_STEPS` steps (`observe`), which is the speed for its kind from then on.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from lengen.budget import step_seconds
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training

WARM_STEPS, TIMED_STEPS = 3, 5  # the fastest timed step: a burst of other work slows some, not all
REMEASURE_SECONDS = 600.0  # a measurement this old is taken again (~0.3 s): the machine's load changes
OBSERVED_STEPS = 30  # a training reports its own step time after this many steps (`observe`)
REFERENCES = {  # one per kind of model: the default single head (10 ms a step), a one-layer transformer (~40 ms)
    "single head": RunConfig(),
    "transformer": with_changes(RunConfig(), task="shift", n_layers=1, n_heads=2),
}
TIMED, TRAINED = "reference runs timed where trainings run", "this server's last training"  # the sources, in words


@dataclass(frozen=True)
class Speed:
    """A measured speed for one kind of model: the trainings' step time over the model's (below 1: faster
    than the model's busy 2-core CPU), where it came from in words, and whether it is old enough to measure again."""

    factor: float
    source: str
    old: bool = False


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


def measure_references(device: str) -> dict[str, float]:
    """Each kind's measured step time over the modelled one, on `device` in this process (a training
    process or a Ray Trainer: where trainings run, at their thread count)."""
    return {kind: measured_step_seconds(reference, device) / step_seconds(reference)
            for kind, reference in REFERENCES.items()}


_measured: dict[tuple[str, str], tuple[float, float]] = {}  # (kind, device) -> (time.monotonic() when, speed)
_sources: dict[tuple[str, str], str] = {}  # (kind, device) -> where its speed came from, in words
_lock = threading.Lock()


def record(speeds: dict[str, float], device: str = "auto", now: float | None = None) -> None:
    """The reference runs' speeds (`measure_references`), measured where the trainings on `device` run."""
    now = time.monotonic() if now is None else now
    with _lock:
        for kind, speed in speeds.items():
            if kind in REFERENCES and speed > 0:
                _measured[kind, device], _sources[kind, device] = (now, speed), TIMED


def training_speed(config: RunConfig, device: str = "auto", now: float | None = None) -> Speed | None:
    """The last speed measured for `config`'s kind of model on `device` (`record` or `observe`), old once
    `REMEASURE_SECONDS` have passed; None before any (the pool's training process measures it as it warms up)."""
    key, now = (_kind(config), device), time.monotonic() if now is None else now
    with _lock:
        if key not in _measured:
            return None
        when, speed = _measured[key]
        return Speed(speed, _sources[key], now - when >= REMEASURE_SECONDS)


def observe(config: RunConfig, seconds_per_step: float, device: str = "auto", now: float | None = None) -> None:
    """A training of `config` on `device` took `seconds_per_step` a step (as trainings run on this server:
    in their process, at their thread count): the speed for its kind of model from now on."""
    if seconds_per_step > 0:
        with _lock:
            _sources[_kind(config), device] = TRAINED
            _measured[_kind(config), device] = (time.monotonic() if now is None else now,
                                                seconds_per_step / step_seconds(config))

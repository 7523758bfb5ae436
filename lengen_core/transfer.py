"""Transfer between delays: does training on delays A first make delays B faster to learn (positive
transfer) or slower (negative)? A measurement of two trainings of the same run on B, one from scratch
and one from a model trained on A first (lengen_core.analysis.delays for the task and the readouts;
docs/science.md, the delay tasks).

    result = transfer(config, before="2-4")   # config trains on its own delays, B
    result.steps_from_scratch, result.steps_from_pretrained, result.speedup

"Learned" is the trainer's own early stop: the batch accuracy holding ≥ ACCURACY_BAR for `patience`
steps; the step counted is the first of that stretch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from lengen_core.analysis.delays import check_delay_run, delay_curve
from lengen_core.config import RunConfig, with_changes
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import Run, Training

# Transfer: does training on delays A first make delays B faster (positive) or slower (negative) to learn?

TRANSFER_PATIENCE = 50  # steps the batch accuracy must hold ≥ the bar to count as learned
TRANSFER_PHASES = ("training on delays A", "learning delays B from A", "learning delays B from scratch")
Told = Callable[[str, int, int], None]  # (phase, steps done, most steps): a caller's progress indicator


@dataclass(frozen=True)
class Transfer:
    before: str  # delays A (pretraining)
    after: str  # delays B
    pretrain_steps: int  # done: the pretraining stops early once it holds 100% (its config's target)
    pretrain_accuracy_on_b: float  # what pretraining alone gives on B, before any step on B
    steps_from_pretrained: int | None  # steps on B until learned; None: not within the budget
    steps_from_scratch: int | None
    budget: int  # most steps on B
    bar: float
    patience: int

    @property
    def speedup(self) -> float | None:
        """Steps from scratch over steps from A (> 1: A helped; < 1: A hurt); a side that never learned
        counts as the whole budget, so the ratio is then a bound."""
        a = self.steps_from_pretrained or self.budget
        b = self.steps_from_scratch or self.budget
        return b / a

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "speedup": self.speedup}


def _run(training: Training, phase: str, told: Told | None) -> Training:
    for progress in training:
        if told is not None:
            told(phase, progress.step, progress.total_steps)
    return training


def steps_to_learn(config: RunConfig, start: dict[str, torch.Tensor] | None = None, device: str = "cpu",
                   patience: int = TRANSFER_PATIENCE, told: Told | None = None, phase: str = TRANSFER_PHASES[2]
                   ) -> tuple[int | None, torch.nn.Module]:
    """Train `config` (from `start` when given) until its batch accuracy holds ≥ ACCURACY_BAR for
    `patience` steps: (the step it first reached the bar and held it, or None within its steps; the model).
    `told(phase, step, steps)` hears each step."""
    config = with_changes(config, target_accuracy=ACCURACY_BAR, patience=patience, keep_training=False)
    training = _run(Training(config, device, start), phase, told)
    learned = training.stopped_early
    return (training.steps_done - patience + 1 if learned else None), training.model


def transfer(config: RunConfig, before: str, pretrain_steps: int | None = None, device: str = "cpu",
             patience: int = TRANSFER_PATIENCE, told: Told | None = None) -> Transfer:
    """`config` trains on delays B (its own); the measurement trains it from scratch, and again from a
    model first trained `pretrain_steps` (default: config's steps) on delays A = `before`, same seed, same
    everything else. Both count steps on B until learned (`steps_to_learn`), up to config's steps.
    `told(phase, step, steps)` hears each step of the three trainings (`TRANSFER_PHASES`)."""
    check_delay_run(config)
    first = with_changes(config, delays=before, steps=pretrain_steps or config.train.steps)
    pretrained = _run(Training(first, device), TRANSFER_PHASES[0], told).finish()
    return transfer_from(pretrained, config.task.delays, config.train.steps, device, patience, told)


def transfer_from(pretrained: Run, after: str, steps: int | None = None, device: str = "cpu",
                  patience: int = TRANSFER_PATIENCE, told: Told | None = None) -> Transfer:
    """Transfer from a run already trained on its delays A (a person's run, a preset) to delays B =
    `after`: its config with delays B, trained for at most `steps` (default: the run's) from the run's
    weights and from scratch (same seed, everything else the run's). What `transfer` measures once it has
    trained A; the two trainings on B are the same."""
    check_delay_run(pretrained.config)
    config = with_changes(pretrained.config, delays=after, steps=steps or pretrained.config.train.steps,
                          continues="")
    check_delay_run(config)
    on_b = delay_curve(pretrained.model, config, config.task.delay_set, samples=128)
    then = with_changes(config, continues=pretrained.config.run_id())
    state = {name: value.detach().clone() for name, value in pretrained.model.state_dict().items()}
    from_a, _ = steps_to_learn(then, state, device, patience, told, TRANSFER_PHASES[1])
    from_scratch, _ = steps_to_learn(config, None, device, patience, told, TRANSFER_PHASES[2])
    return Transfer(pretrained.config.task.delays, config.task.delays, pretrained.steps,
                    on_b.mean_accuracy(True) or 0.0, from_a, from_scratch, config.train.steps, ACCURACY_BAR, patience)

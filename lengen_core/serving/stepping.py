"""Pause, step and resume for a training: `StepGate` says whether the next step may be taken.

A training is an iterator (`lengen_core.training.Training`), so holding it is only not asking for its
next step: the pool (`lengen_core.serving.jobs`) keeps one gate per job, and a training process
(`lengen_core.serving.training_process`) its own, driven by the same commands over its pipe.
"""

from __future__ import annotations

MAX_ADVANCE = 1_000  # steps one Step press may let through


class StepGate:
    """Whether a training may take its next step: running (`allowance` None), paused (0), or n steps
    to go before it pauses again. Not thread-safe: its owner holds a lock or is one thread."""

    def __init__(self) -> None:
        self.allowance: int | None = None

    @property
    def paused(self) -> bool:
        return self.allowance == 0

    def pause(self) -> None:
        self.allowance = 0

    def resume(self) -> None:
        self.allowance = None

    def advance(self, steps: int) -> None:
        """Let `steps` more steps through, then pause (while running: pause after `steps` more)."""
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_ADVANCE:
            raise ValueError(f"steps to advance must be a whole number from 1 to {MAX_ADVANCE}, got {steps!r}")
        self.allowance = (self.allowance or 0) + steps

    def may_step(self) -> bool:
        return self.allowance != 0

    def took_step(self) -> None:
        if self.allowance:
            self.allowance -= 1

    def apply(self, command: tuple[str, int]) -> None:
        """A command of the pipe protocol: ("pause", _), ("resume", _) or ("advance", n)."""
        kind, steps = command
        if kind == "pause":
            self.pause()
        elif kind == "resume":
            self.resume()
        elif kind == "advance":
            self.advance(steps)
        else:
            raise ValueError(f"unknown training command {kind!r}: allowed pause, resume, advance")

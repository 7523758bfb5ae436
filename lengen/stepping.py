"""Pause, step, resume and pace for a training: `StepGate` says whether, and when, the next step may be taken.

A training is an iterator (`lengen_core.training.Training`), so holding it is only not asking for its
next step: the pool (`lengen.jobs`) keeps one gate per job (`lengen.job.Job`), and a training process
(`lengen.training_process`) its own, driven by the same commands over its pipe.

A pace (`Pace`: start paused, and at most so many steps per second) only delays when the next step
is asked for; the steps themselves, their data and their order are the training's, so a paced run
ends with the very weights an unpaced one does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lengen_core.config import ConfigError

MAX_ADVANCE = 1_000  # steps one Step press may let through
MIN_STEPS_PER_SECOND = 0.2  # one step every 5 s: slow enough to talk over each step, no slower
MAX_STEPS_PER_SECOND = 1_000.0  # above this a pace changes nothing a person can see


class PaceError(ConfigError):
    """A pace outside its bounds; the message says what is allowed."""


def check_steps_per_second(value: object) -> float:
    """`value` as a pace in steps per second: 0 (as fast as possible) or from MIN_STEPS_PER_SECOND to
    MAX_STEPS_PER_SECOND; PaceError otherwise."""
    allowed = (f"0 (as fast as possible) or a number from {MIN_STEPS_PER_SECOND:g} to {MAX_STEPS_PER_SECOND:,.0f} "
               "steps per second")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PaceError(f"steps per second must be {allowed}, got {value!r}")
    if value != 0 and not MIN_STEPS_PER_SECOND <= value <= MAX_STEPS_PER_SECOND:
        raise PaceError(f"steps per second must be {allowed}, got {value:g}")
    return float(value)


@dataclass(frozen=True)
class Pace:
    """How a live training goes: `start_paused` (it waits before its first step for Step or Resume) and at
    most `steps_per_second` steps a second (0: as fast as the machine trains). Not part of the run: the
    same config trains the same weights at any pace, and is stored under the same id."""

    start_paused: bool = False
    steps_per_second: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.start_paused, bool):
            raise PaceError(f"start paused must be true or false, got {self.start_paused!r}")
        object.__setattr__(self, "steps_per_second", check_steps_per_second(self.steps_per_second))

    @property
    def paced(self) -> bool:
        return self.steps_per_second > 0

    def commands(self) -> list[tuple[str, float]]:
        """The gate commands that set this pace on a training about to start."""
        return ([("pace", self.steps_per_second)] if self.paced else []) + ([("pause", 0)] if self.start_paused else [])

    def seconds(self, steps: int, step_seconds: float) -> float:
        """The wall-clock time of `steps` steps of `step_seconds` each at this pace (paused time aside)."""
        return steps * max(step_seconds, 1 / self.steps_per_second if self.paced else 0.0)


class StepGate:
    """Whether a training may take its next step: running (`allowance` None), paused (0), or n steps
    to go before it pauses again; and when: at a pace, no sooner than 1 / steps per second after the
    last step began. Not thread-safe: its owner holds a lock or is one thread."""

    def __init__(self) -> None:
        self.allowance: int | None = None
        self.interval = 0.0  # seconds from one step's start to the next's (0: no pace)
        self._last_start: float | None = None

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

    def set_pace(self, steps_per_second: float) -> None:
        """At most `steps_per_second` steps a second from now on (0: as fast as possible)."""
        rate = check_steps_per_second(steps_per_second)
        self.interval = 1 / rate if rate else 0.0

    def may_step(self) -> bool:
        return self.allowance != 0

    def delay(self, now: float) -> float:
        """Seconds until the pace lets the next step start (0: now; a paused gate's is its pace's too)."""
        if not self.interval or self._last_start is None:
            return 0.0
        return max(0.0, self._last_start + self.interval - now)

    def starting(self, now: float) -> None:
        """A step starts at `now` (time.monotonic()): the pace counts from here."""
        self._last_start = now

    def took_step(self) -> None:
        if self.allowance:
            self.allowance -= 1

    def apply(self, command: tuple[str, float]) -> None:
        """A command of the pipe protocol: ("pause", _), ("resume", _), ("advance", n) or ("pace", steps per second)."""
        kind, value = command
        if kind == "pause":
            self.pause()
        elif kind == "resume":
            self.resume()
        elif kind == "advance":
            self.advance(value)
        elif kind == "pace":
            self.set_pace(value)
        else:
            raise ValueError(f"unknown training command {kind!r}: allowed pause, resume, advance, pace")


UNPACED = Pace()  # as fast as it trains, not paused at the start: a training's pace unless one is asked for

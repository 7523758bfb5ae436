"""One training request as the pool holds it (`Job`): who holds it, its step gate and the clock of its
pauses, its progress and history, and the status a requester reads (`JobStatus`).

A job's methods are called under its pool's lock (lengen.jobs.TrainingPool); they change the job and
say what the caller must do next (time a pause that has just begun), never wait and never start threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

from lengen.budget import TRAIN_SECONDS_ENV
from lengen.stepping import StepGate
from lengen_core.analysis.watch import LiveView
from lengen_core.config import RunConfig
from lengen_core.training import Progress

State = Literal["queued", "running", "done", "failed", "cancelled"]
PAUSE_SECONDS_ENV = "LENGEN_PAUSE_SECONDS"


class SharedTraining(RuntimeError):
    """A pause, step or resume from a holder of a shared training who is not its driver."""


@dataclass(frozen=True)
class JobStatus:
    run_id: str
    state: State
    position: int | None  # 1 = next to start; None unless queued
    progress: Progress | None
    history: dict[str, list[float]]
    stored_run_id: str | None  # the run in the store once done (a stopped run's id has its steps)
    from_store: bool  # the request was answered from the store without training
    stopped: bool  # stopped by its requester before the end
    error: str | None
    note: str | None = None  # e.g. stopped at the wall-clock limit, what was kept
    paused: bool = False  # running, and waiting for resume or a step (StepGate)
    holders: int = 1  # requests sharing this training (the same run asked for by several browsers)
    drives: bool = True  # this ticket may pause, step, resume and stop it: the earliest holder (`TrainingPool.stop`)
    view: LiveView | None = None  # the carrier and an attention map at a recent step (lengen_core.analysis.watch)
    steps_per_second: float = 0.0  # its pace: at most this many steps a second (0: as fast as it trains)
    # (no "measuring" state: a run is reported done before its first-visit numbers are measured, save_run; a page
    # asks the store whether they are coming, RunStore.first_visit_pending, and says so: ui.runs.await_first_visit)


@dataclass
class Job:
    config: RunConfig
    tickets: set[int] = field(default_factory=set)
    state: State = "queued"
    progress: Progress | None = None
    history: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "loss": [], "accuracy": []})
    stored_run_id: str | None = None
    from_store: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    keep_partial: bool = False  # Stop keeps what was trained; a vanished requester does not
    error: str | None = None
    owner: str | None = None  # who asked (a browser), for the one-training-per-requester rule
    limit_seconds: float = float("inf")  # wall-clock limit once running
    timed_out: bool = False  # stopped at the wall-clock limit (its steps so far are kept)
    paused_out: bool = False  # stopped after pause_seconds paused in all (its steps so far are kept)
    gate: StepGate = field(default_factory=StepGate)  # pause / step / resume (a mirror of the child's when isolated)
    commands: list[tuple[str, float]] = field(default_factory=list)  # for the child, not sent yet
    started: float | None = None  # time.monotonic() when it started running
    paused_since: float | None = None
    paused_seconds: float = 0.0  # not counted against the wall-clock limit
    view: LiveView | None = None

    @property
    def active(self) -> bool:
        """Queued or running, and not being stopped."""
        return self.state in ("queued", "running") and not self.stop.is_set()

    def drives(self, ticket: int) -> bool:
        """Several browsers asking for the same run share one training (a class on one lesson link): the
        earliest ticket still holding it drives it (pause, step, resume, stop); when it leaves, the next."""
        return not self.tickets or ticket == min(self.tickets)

    def apply(self, command: tuple[str, float], now: float) -> bool:
        """Apply a command to the gate and keep it for the child; True when the job has just been paused."""
        was_paused = self.gate.paused
        self.gate.apply(command)  # a bad count or pace raises here, before anything is sent
        self.commands.append(command)
        return self._clock_pause(was_paused, now)

    def record(self, progress: Progress, now: float) -> bool:
        """A step's progress, into the history; True when the job has just been paused (a step count run out)."""
        self.progress = progress
        was_paused = self.gate.paused
        self.gate.took_step()  # the mirror of the child's gate counts the same steps
        for key, value in (("step", progress.step), ("loss", progress.loss), ("accuracy", progress.accuracy)):
            self.history[key].append(value)
        if progress.probe is not None:  # the horizon and m_out predicted from the weights (the live view)
            probe = progress.probe
            for key, value in (("probe_step", probe.step), ("horizon", probe.horizon), ("m_out", probe.m_out),
                               ("probe_ceiling", probe.ceiling), ("train_length", probe.train_length),
                               ("probe_seconds", probe.seconds)):
                self.history.setdefault(key, []).append(value)
        return self._clock_pause(was_paused, now)

    def _clock_pause(self, was_paused: bool, now: float) -> bool:
        """Count the time the job spends paused, so it is not charged to the wall-clock limit; True when a
        pause has just begun (the caller times it against the pool's pause allowance)."""
        if self.gate.paused and not was_paused:
            self.paused_since = now
            return True
        if was_paused and not self.gate.paused and self.paused_since is not None:
            self.paused_seconds += now - self.paused_since
            self.paused_since = None
        return False

    def paused_for(self, now: float) -> float:
        """Seconds spent paused in all, the pause going on now included."""
        return self.paused_seconds + (now - self.paused_since if self.paused_since is not None else 0.0)

    def take_commands(self) -> list[tuple[str, float]]:
        """The pause / resume / advance commands for the job's child, each handed over once."""
        commands, self.commands = self.commands, []
        return commands

    def status(self, ticket: int, position: int | None, pause_seconds: float) -> JobStatus:
        return JobStatus(
            run_id=self.config.run_id(),
            state=self.state,
            position=position,
            progress=self.progress,
            history={key: list(values) for key, values in self.history.items()},
            stored_run_id=self.stored_run_id,
            from_store=self.from_store,
            stopped=self.stop.is_set(),
            error=self.error,
            paused=self.state == "running" and self.gate.paused,
            holders=len(self.tickets),
            drives=self.drives(ticket),
            view=self.view,
            note=self._stop_note(pause_seconds),
            steps_per_second=1 / self.gate.interval if self.gate.interval else 0.0,
        )

    def _stop_note(self, pause_seconds: float) -> str | None:
        """Why the server stopped the job, and what it kept (None: it did not)."""
        kept = f"the {self.progress.step if self.progress else 0} steps done were kept"
        if self.timed_out:
            return (f"stopped at this server's wall-clock limit of {self.limit_seconds:.0f} s per training "
                    f"({TRAIN_SECONDS_ENV}); {kept}")
        if self.paused_out:
            return (f"stopped after {pause_seconds:.0f} s paused in all, this server's limit for a paused training "
                    f"({PAUSE_SECONDS_ENV}: a paused training holds a worker); {kept}")
        return None

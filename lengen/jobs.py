"""A shared training pool: a limit on concurrent trainings, a fair queue, identical requests merged.

    pool = TrainingPool(store, max_concurrent=2)
    ticket = pool.submit(config)       # stored already -> done at once; same config running -> shared
    pool.status(ticket)                # JobStatus: state, queue position, progress, history, run id
    pool.release(ticket)               # the requester is gone (Stop, or its browser session ended)
    pool.pause(ticket); pool.advance(ticket, 10); pool.resume(ticket)   # a class watches it learn
    pool.submit(config, pace=Pace(start_paused=True, steps_per_second=10))  # or at a pace it can follow

A running job can be paused, advanced by exactly n steps (then paused again) and resumed
(`lengen.stepping.StepGate`): the training is an iterator, so a pause only means its
next step waits, and a resumed run reaches the very weights an uninterrupted one does. A paused job
keeps its worker, and the time it spends paused does not count against the wall-clock limit. A pace
(`Pace`: start paused, at most n steps a second, changed later with `set_pace`) only delays each next
step, so a paced run ends with the very weights an unpaced one does; its budget check counts the pace.
Requests for the same run share one job (a class on one lesson link): only its driver, the earliest
ticket still holding it, pauses, steps, resumes or stops it; another holder's Stop only lets go of its
own ticket, and the training goes on for the rest.

Each request holds a ticket; a job runs while any ticket on it is held, and is cancelled (queued:
dropped; running: stopped at the next step, nothing saved) when the last ticket is released. Worker
threads take jobs first in, first out. A finished run is saved and reported done, then measured at the pages'
default request by the same worker (lengen.first_visit.save_run: the store adds the numbers when
they are ready, `RunStore.first_visit_pending` meanwhile). With `isolate=True` (the server's choice) each worker runs
its trainings in a child process of its own (`lengen.training_process`), so serving pages and
training never compete for one interpreter's lock. The first worker's process, once warm, times the
reference runs of lengen.calibration there (and again, idle, when the pool is asked for an old
speed: `training_speed`), so the Train form's estimate is the trainings' own machine's and the server's
interpreter never trains. Nothing here knows about a UI; threads never raise out.

The pool is its parts composed: lengen.job (one job's state and status), lengen.job_queue (tickets,
merging, order, owners' limits, the pause allowance) and lengen.pool_workers (the worker threads, their
training processes, calibration, the wall-clock limit). Here: the budget checks before a request is
queued, and the defaults an operator sets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from lengen.budget import check, training_cost
from lengen.calibration import Speed, training_speed
from lengen.job import PAUSE_SECONDS_ENV, JobStatus, SharedTraining, State
from lengen.job_queue import RUNS_PER_OWNER_ENV, JobQueue, OwnerBusy, QueueFull
from lengen.lineage import parent_run
from lengen.pool_workers import Workers
from lengen.runtime import env_whole_number, usable_cpus
from lengen.stepping import Pace
from lengen.store import RunStore
from lengen.training_process import TrainingProcess, live_training
from lengen_core.config import RunConfig
from lengen_core.training import Training

__all__ = ["CALIBRATE_RETRY_SECONDS", "MAX_QUEUE", "PAUSE_SECONDS_ENV", "RUNS_PER_OWNER_ENV", "JobStatus", "OwnerBusy",
           "QueueFull", "SharedTraining", "State", "TrainingPool"]

MAX_QUEUE = 200
DEFAULT_PAUSE_SECONDS = 900  # a training paused for 15 minutes in all gives its worker back (its steps are kept)
DEFAULT_RUNS_PER_OWNER = 30  # trainings one browser may start on this server (answers from the store are free)
CALIBRATE_RETRY_SECONDS = 60.0  # a speed measurement that failed or timed out is tried again after this


class TrainingPool:
    def __init__(
        self,
        store: RunStore,
        max_concurrent: int | None = None,
        device: str = "auto",
        max_queue: int = MAX_QUEUE,
        trainer: Callable[[RunConfig, str], Training] | None = None,
        isolate: bool = False,
        train_seconds: float | None = None,
        runs_per_owner: int | None = None,
        warm_delay: float = 0.0,
        pause_seconds: float | None = None,
        process: Callable[[RunStore, str, int], TrainingProcess] | None = None,
    ) -> None:
        self.store = store
        # the wall-clock limit of one training; None: the budget's (LENGEN_TRAIN_SECONDS)
        self.train_seconds = train_seconds
        # a paused training keeps its worker: paused this long in all, it is stopped and its steps kept
        self.pause_seconds = pause_seconds or env_whole_number(PAUSE_SECONDS_ENV, DEFAULT_PAUSE_SECONDS)
        self.warm_delay = warm_delay  # seconds before the first training process starts, if no job comes sooner
        self.runs_per_owner = runs_per_owner or env_whole_number(RUNS_PER_OWNER_ENV, DEFAULT_RUNS_PER_OWNER)
        with contextlib.suppress(OSError):
            store.clean_partial()  # what a killed save left behind (its writer is gone)
        self.max_concurrent = max_concurrent or usable_cpus()
        self.isolate = isolate  # each training in a child process (a server); else in a worker thread
        self.threads = max(1, usable_cpus() // self.max_concurrent)  # torch threads per child
        self.device = device
        self.max_queue = max_queue
        self._queue = JobQueue(store, max_queue, self.runs_per_owner, self.pause_seconds)
        # what an isolated worker trains in: a child process of its own, or (lengen.ray_pool)
        # an actor on a Ray cluster, anything with TrainingProcess's start / train / close / pid
        self._workers = Workers(
            self._queue, store, self.max_concurrent, device, isolate, self.threads, warm_delay,
            trainer or (lambda config, device: live_training(config, device, store)), process or TrainingProcess,
        )

    def submit(self, config: RunConfig, owner: str | None = None, pace: Pace | None = None) -> int:
        """A ticket for this config's run: answered from the store, joined to a running job, or queued.
        `pace`: how a new job goes (start paused, steps per second); a request joined to a running job
        watches it at the pace its driver set.

        Raises, before anything is queued: BudgetError (the training's estimated memory or time is
        over the server's budgets), StoreError (the store cannot take the run, or the run it continues is
        not stored), ConfigError (a continuation that changes the task or model), OwnerBusy (`owner`
        already has another training running or waiting), QueueFull.
        """
        # The cost model's machine-independent time, at the pace asked for: a refusal must not depend on how
        # busy the machine was when it was measured (the wall-clock limit stops what runs longer)
        check(training_cost(config, pace))
        parent_run(config, self.store)  # a continuation's stored run is there and fits, before anything waits
        return self._queue.submit(config, owner, pace, self.train_seconds)

    def status(self, ticket: int) -> JobStatus:
        return self._queue.status(ticket)

    def status_after_first_step(self, ticket: int, timeout: float) -> JobStatus:
        """The status once a running job has reported its first step or ended, waiting at most
        `timeout` seconds (a queued job is answered at once)."""
        self._queue.wait_for_first_step(ticket, timeout)
        return self.status(ticket)

    def stop(self, ticket: int) -> None:
        """Stop now and keep the steps trained so far (as a run whose steps are the steps done). From a
        holder of a shared training that does not drive it: that holder leaves (`release`), and the
        training goes on for the others."""
        self._queue.stop(ticket)

    def pause(self, ticket: int) -> None:
        """Hold the job before its next step (a queued job starts paused)."""
        self._queue.command(ticket, ("pause", 0))

    def resume(self, ticket: int) -> None:
        self._queue.command(ticket, ("resume", 0))

    def advance(self, ticket: int, steps: int = 1) -> None:
        """Exactly `steps` more steps, then pause again. ValueError for a count outside 1 to MAX_ADVANCE."""
        self._queue.command(ticket, ("advance", steps))

    def set_pace(self, ticket: int, steps_per_second: float) -> None:
        """At most `steps_per_second` steps a second from the next step on (0: as fast as it trains).
        PaceError for a pace outside 0 or MIN_STEPS_PER_SECOND to MAX_STEPS_PER_SECOND."""
        self._queue.command(ticket, ("pace", steps_per_second))

    def release(self, ticket: int) -> None:
        """The requester is gone: cancel the job if no other requester holds it."""
        self._queue.release(ticket)

    def owned(self, owner: str) -> int | None:
        """The earliest ticket still held on `owner`'s queued or running training (None: it has none), so a
        browser that reloads, here or on another replica of a shared pool, finds the training it started."""
        return self._queue.owned(owner)

    def counts(self) -> dict[str, int]:
        return {**self._queue.counts(), "limit": self.max_concurrent}

    def training_speed(self, config: RunConfig) -> Speed | None:
        """The speed measured for `config`'s kind of model where this pool trains (lengen.
        calibration: the reference runs timed in its first worker's process, or its trainings' own step times);
        None until the first measurement arrives (a cold server's first seconds). None or old: the first
        worker measures again when it is idle, in its process, never in the caller's."""
        speed = training_speed(config, self.device)
        if speed is None or speed.old:
            self._workers.remeasure(CALIBRATE_RETRY_SECONDS)
        return speed

    def training_pids(self) -> list[int]:
        """The process ids of this pool's live training processes (isolated pools only)."""
        return self._workers.pids()

    def close(self, timeout: float = 5.0) -> None:
        self._queue.close()
        self._workers.join(timeout)

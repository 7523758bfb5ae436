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
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from lengen_core.analysis.watch import LiveView, live_view, view_due
from lengen_core.config import RunConfig
from lengen.budget import TRAIN_SECONDS_ENV, Budgets, check, training_cost
from lengen.calibration import OBSERVED_STEPS, Speed, measure_references, observe, record, training_speed
from lengen.lineage import parent_run
from lengen.runtime import env_whole_number, usable_cpus
from lengen.stepping import Pace, StepGate
from lengen.store import RunStore
from lengen.training_process import TrainingProcess, live_training, save_run
from lengen_core.training import Progress, Training

State = Literal["queued", "running", "done", "failed", "cancelled"]
MAX_QUEUE = 200
RUNS_PER_OWNER_ENV = "LENGEN_RUNS_PER_BROWSER"
PAUSE_SECONDS_ENV = "LENGEN_PAUSE_SECONDS"
DEFAULT_PAUSE_SECONDS = 900  # a training paused for 15 minutes in all gives its worker back (its steps are kept)
DEFAULT_RUNS_PER_OWNER = 30  # trainings one browser may start on this server (answers from the store are free)
CALIBRATE_RETRY_SECONDS = 60.0  # a speed measurement that failed or timed out is tried again after this
LOG = logging.getLogger(__name__)


class SharedTraining(RuntimeError):
    """A pause, step or resume from a holder of a shared training who is not its driver."""


class QueueFull(RuntimeError):
    """Too many trainings are waiting; the message says how many and what to do."""


class OwnerBusy(RuntimeError):
    """This requester (a browser) already has a training running or waiting; the message says which."""


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
class _Job:
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
    commands: list[tuple[str, int]] = field(default_factory=list)  # for the child, not sent yet
    started: float | None = None  # time.monotonic() when it started running
    paused_since: float | None = None
    paused_seconds: float = 0.0  # not counted against the wall-clock limit
    view: LiveView | None = None


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
        # what an isolated worker trains in: a child process of its own, or (lengen.ray_pool)
        # an actor on a Ray cluster, anything with TrainingProcess's start / train / close / pid
        self._process = process or TrainingProcess
        self.train_seconds = train_seconds
        # a paused training keeps its worker: paused this long in all, it is stopped and its steps kept
        self.pause_seconds = pause_seconds or env_whole_number(PAUSE_SECONDS_ENV, DEFAULT_PAUSE_SECONDS)
        self.warm_delay = warm_delay  # seconds before the first training process starts, if no job comes sooner
        self.runs_per_owner = runs_per_owner or env_whole_number(RUNS_PER_OWNER_ENV, DEFAULT_RUNS_PER_OWNER)
        self._owner_runs: dict[str, int] = {}  # trainings started per owner since the server started  # the wall-clock limit of one training; None: the budget's (LENGEN_TRAIN_SECONDS)
        with contextlib.suppress(OSError):
            store.clean_partial()  # what a killed save left behind (its writer is gone)
        self.max_concurrent = max_concurrent or usable_cpus()
        self.isolate = isolate  # each training in a child process (a server); else in a worker thread
        self.threads = max(1, usable_cpus() // self.max_concurrent)  # torch threads per child
        self.device = device
        self.max_queue = max_queue
        self._trainer = trainer or (lambda config, device: live_training(config, device, store))
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._progressed = threading.Condition(self._lock)  # a job reported a step or ended
        self._queue: deque[_Job] = deque()
        self._jobs: dict[str, _Job] = {}  # active (queued or running) by run id
        self._tickets: dict[int, _Job] = {}
        self._numbers = itertools.count(1)
        self._closed = False
        self._children: list[TrainingProcess] = []
        self._busy = [False] * self.max_concurrent
        self._remeasure = False  # worker 0 times the reference runs when next idle (`training_speed`)
        self._calibrating = False
        self._calibrated_at = -float("inf")  # time.monotonic() when the last measurement began
        self._workers = [
            threading.Thread(target=self._work, args=(i,), name=f"lengen-train-{i}", daemon=True)
            for i in range(self.max_concurrent)
        ]
        for worker in self._workers:
            worker.start()

    def submit(self, config: RunConfig, owner: str | None = None, pace: Pace | None = None) -> int:
        """A ticket for this config's run: answered from the store, joined to a running job, or queued.
        `pace`: how a new job goes (start paused, steps per second); a request joined to a running job
        watches it at the pace its driver set.

        Raises, before anything is queued: BudgetError (the training's estimated memory or time is
        over the server's budgets), StoreError (the store cannot take the run, or the run it continues is
        not stored), ConfigError (a continuation that changes the task or model), OwnerBusy (`owner`
        already has another training running or waiting), QueueFull.
        """
        run_id = config.run_id()
        # The cost model's machine-independent time, at the pace asked for: a refusal must not depend on how
        # busy the machine was when it was measured (the wall-clock limit stops what runs longer)
        check(training_cost(config, pace))
        parent_run(config, self.store)  # a continuation's stored run is there and fits, before anything waits
        with self._lock:
            ticket = next(self._numbers)
            job = self._jobs.get(run_id)
            if job is not None and job.stop.is_set() and not job.keep_partial:
                job = None  # being cancelled (its last holder left): a fresh request trains anew
            if job is None and self.store.exists(run_id):
                job = _Job(config, state="done", stored_run_id=run_id, from_store=True)
            elif job is None:
                self.store.check_can_save(config)  # read-only, full or over quota: say so before training
                mine = next((j for j in self._jobs.values() if owner is not None and j.owner == owner
                             and j.state in ("queued", "running") and not j.stop.is_set()), None)
                if mine is not None:
                    raise OwnerBusy(f"this browser already has a training {mine.state} ({mine.config.run_id()}); one at a "
                                    "time per browser: wait for it or stop it first")
                if owner is not None and self._owner_runs.get(owner, 0) >= self.runs_per_owner:
                    raise OwnerBusy(f"this browser has started {self.runs_per_owner} trainings on this server, its limit "
                                    f"({RUNS_PER_OWNER_ENV}); open a stored run or a preset instead")
                if len(self._queue) >= self.max_queue:
                    waiting = len(self._queue)
                    raise QueueFull(
                        f"{waiting} training{' is' if waiting == 1 else 's are'} already waiting (the limit is "
                        f"{self.max_queue}); try again in a minute or open a stored run"
                    )
                job = _Job(config, owner=owner, limit_seconds=self.train_seconds or Budgets.from_env().train_seconds)
                if owner is not None:
                    self._owner_runs[owner] = self._owner_runs.get(owner, 0) + 1
                self._jobs[run_id] = job
                for command in (pace or Pace()).commands():  # before it starts: its first step is already paced
                    self._apply(job, command)
                self._queue.append(job)
                self._wake.notify_all()  # the first idle worker in order takes it
            job.tickets.add(ticket)
            self._tickets[ticket] = job
            return ticket

    def status(self, ticket: int) -> JobStatus:
        with self._lock:
            job = self._job(ticket)
            position = next((i + 1 for i, queued in enumerate(self._queue) if queued is job), None)
            return JobStatus(
                run_id=job.config.run_id(),
                state=job.state,
                position=position,
                progress=job.progress,
                history={key: list(values) for key, values in job.history.items()},
                stored_run_id=job.stored_run_id,
                from_store=job.from_store,
                stopped=job.stop.is_set(),
                error=job.error,
                paused=job.state == "running" and job.gate.paused,
                holders=len(job.tickets),
                drives=self._drives(job, ticket),
                view=job.view,
                note=_stop_note(job, self.pause_seconds),
                steps_per_second=1 / job.gate.interval if job.gate.interval else 0.0,
            )

    def status_after_first_step(self, ticket: int, timeout: float) -> JobStatus:
        """The status once a running job has reported its first step or ended, waiting at most
        `timeout` seconds (a queued job is answered at once)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            job = self._job(ticket)
            while job.state == "running" and job.progress is None and (left := deadline - time.monotonic()) > 0:
                self._progressed.wait(left)
        return self.status(ticket)

    @staticmethod
    def _drives(job: _Job, ticket: int) -> bool:
        """Several browsers asking for the same run share one training (a class on one lesson link): the
        earliest ticket still holding it drives it (pause, step, resume, stop); when it leaves, the next."""
        return not job.tickets or ticket == min(job.tickets)

    def stop(self, ticket: int) -> None:
        """Stop now and keep the steps trained so far (as a run whose steps are the steps done). From a
        holder of a shared training that does not drive it: that holder leaves (`release`), and the
        training goes on for the others."""
        with self._lock:
            job = self._job(ticket)
            drives = self._drives(job, ticket)
            if drives:
                job.keep_partial = True
                job.stop.set()
                self._progressed.notify_all()  # a paused training wakes to stop
                if job.state == "queued":
                    self._drop(job)
        if not drives:
            self.release(ticket)

    def pause(self, ticket: int) -> None:
        """Hold the job before its next step (a queued job starts paused)."""
        self._command(ticket, ("pause", 0))

    def resume(self, ticket: int) -> None:
        self._command(ticket, ("resume", 0))

    def advance(self, ticket: int, steps: int = 1) -> None:
        """Exactly `steps` more steps, then pause again. ValueError for a count outside 1 to MAX_ADVANCE."""
        self._command(ticket, ("advance", steps))

    def set_pace(self, ticket: int, steps_per_second: float) -> None:
        """At most `steps_per_second` steps a second from the next step on (0: as fast as it trains).
        PaceError for a pace outside 0 or MIN_STEPS_PER_SECOND to MAX_STEPS_PER_SECOND."""
        self._command(ticket, ("pace", steps_per_second))

    def _command(self, ticket: int, command: tuple[str, float]) -> None:
        with self._lock:
            job = self._job(ticket)
            if job.state not in ("queued", "running"):
                return  # it has ended: nothing to hold
            if not self._drives(job, ticket):
                others = len(job.tickets) - 1
                raise SharedTraining(f"this training is shared with {others} other request{'s' * (others != 1)} for "
                                     "the same run; the one that asked first pauses, steps and resumes it")
            self._apply(job, command)

    def _apply(self, job: _Job, command: tuple[str, float]) -> None:
        """Apply a command to the job's gate and queue it for its child (under the lock)."""
        was_paused = job.gate.paused
        job.gate.apply(command)  # a bad count or pace raises here, before anything is sent
        job.commands.append(command)
        self._paused_clock(job, was_paused)
        self._progressed.notify_all()  # a training in a worker thread waits on it while paused or paced

    def _paused_clock(self, job: _Job, was_paused: bool) -> None:
        """Count the time the job spends paused, so it is not charged to the wall-clock limit, and time
        the pause against `pause_seconds` (under the lock)."""
        now = time.monotonic()
        if job.gate.paused and not was_paused:
            job.paused_since = now
            self._pause_timer(job, self.pause_seconds - job.paused_seconds)
        elif was_paused and not job.gate.paused and job.paused_since is not None:
            job.paused_seconds += now - job.paused_since
            job.paused_since = None

    def _pause_timer(self, job: _Job, seconds: float) -> None:
        timer = threading.Timer(max(0.0, seconds), self._pause_expire, args=(job,))
        timer.daemon = True
        timer.start()

    def _pause_expire(self, job: _Job) -> None:
        """A paused job's pause allowance may be spent: if so, stop it keeping its steps (a queued one is
        dropped), so a paused training cannot hold a worker for ever; if not (it was resumed and paused
        again since), look again when it would be."""
        with self._lock:
            if job.state not in ("queued", "running") or job.stop.is_set() or job.paused_since is None:
                return
            paused = job.paused_seconds + time.monotonic() - job.paused_since
            if paused < self.pause_seconds:
                self._pause_timer(job, self.pause_seconds - paused)
                return
            job.paused_out = job.keep_partial = True
            job.stop.set()
            self._progressed.notify_all()  # the paused training wakes to stop
            if job.state == "queued":
                self._drop(job)

    def release(self, ticket: int) -> None:
        """The requester is gone: cancel the job if no other requester holds it."""
        with self._lock:
            job = self._tickets.pop(ticket, None)
            if job is None:
                return
            job.tickets.discard(ticket)
            if not job.tickets and job.state in ("queued", "running"):
                job.stop.set()
                self._progressed.notify_all()  # a paused training wakes to stop
                if job.state == "queued":
                    self._drop(job)

    def owned(self, owner: str) -> int | None:
        """The earliest ticket still held on `owner`'s queued or running training (None: it has none), so a
        browser that reloads, here or on another replica of a shared pool, finds the training it started."""
        with self._lock:
            job = next((j for j in self._jobs.values() if j.owner == owner and j.state in ("queued", "running")
                        and not j.stop.is_set() and j.tickets), None)
            return None if job is None else min(job.tickets)

    def counts(self) -> dict[str, int]:
        with self._lock:
            running = sum(job.state == "running" for job in self._jobs.values())
            return {"running": running, "queued": len(self._queue), "limit": self.max_concurrent}

    def training_speed(self, config: RunConfig) -> Speed | None:
        """The speed measured for `config`'s kind of model where this pool trains (lengen.
        calibration: the reference runs timed in its first worker's process, or its trainings' own step times);
        None until the first measurement arrives (a cold server's first seconds). None or old: the first
        worker measures again when it is idle, in its process, never in the caller's."""
        speed = training_speed(config, self.device)
        if speed is None or speed.old:
            with self._lock:
                if not self._calibrating and time.monotonic() - self._calibrated_at >= CALIBRATE_RETRY_SECONDS:
                    self._remeasure = True
                    self._wake.notify_all()
        return speed

    def training_pids(self) -> list[int]:
        """The process ids of this pool's live training processes (isolated pools only)."""
        with self._lock:
            return [child.pid for child in self._children if child.pid is not None]

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            for job in self._jobs.values():
                job.stop.set()
            self._wake.notify_all()
            self._progressed.notify_all()
        for worker in self._workers:
            worker.join(timeout)

    def _job(self, ticket: int) -> _Job:
        job = self._tickets.get(ticket)
        if job is None:
            raise KeyError(f"unknown or released ticket {ticket}")
        return job

    def _drop(self, job: _Job) -> None:
        self._queue.remove(job)
        job.state = "cancelled"
        if self._jobs.get(job.config.run_id()) is job:
            del self._jobs[job.config.run_id()]

    def _work(self, index: int) -> None:
        """Worker `index` takes the next job only when every worker before it is busy, so the
        warm ones (worker 0's process starts with the pool) serve first; the others start theirs
        when the pool is first that busy."""
        child = None
        if self.isolate:
            child = self._process(self.store, self.device, self.threads)
            with self._lock:
                self._children.append(child)
            if index == 0:  # ready before the first request: a process start and a torch import take seconds
                with self._lock:  # but not while the server draws its first pages, unless work arrives first
                    self._wake.wait_for(lambda: self._queue or self._closed, timeout=self.warm_delay)
                    closed = self._closed
                    # the reference runs' speed, timed in the child once warm; a job already waiting goes first
                    self._remeasure = self._remeasure or not self._queue
                if not closed:
                    child.start()
        try:
            while True:
                with self._lock:
                    while not self._closed and not (self._queue and all(self._busy[:index])) and not (
                            index == 0 and self._remeasure):
                        self._wake.wait()
                    if self._closed:
                        return
                    if not (self._queue and all(self._busy[:index])):  # worker 0, idle, asked for the speed
                        self._remeasure, self._calibrating = False, True
                        self._calibrated_at = time.monotonic()
                        self._busy[index] = True  # a job arriving meanwhile goes to the next worker, not behind it
                        self._wake.notify_all()
                        job = None
                    else:
                        job = self._queue.popleft()
                        job.state = "running"
                        self._busy[index] = True
                        if self._queue:
                            self._wake.notify_all()  # the next worker may take the next job now
                if job is None:
                    self._calibrate(child)
                    continue
                try:
                    self._train(job, child)
                finally:
                    with self._lock:
                        self._busy[index] = False
                        self._wake.notify_all()
        finally:
            if child is not None:
                child.close()

    def _calibrate(self, child: TrainingProcess | None) -> None:
        """Time the reference runs where this pool trains: in `child` (after its warm-up), or in this worker
        thread for a pool without processes; recorded for `training_speed`. A failure leaves the speed
        unmeasured (the form says so) and is tried again after CALIBRATE_RETRY_SECONDS."""
        try:
            speeds = child.calibrate() if child is not None else measure_references(self.device)
            if speeds:
                record(speeds, self.device)
        except Exception:  # never out of the worker: its trainings matter more than the estimate
            LOG.exception("timing the reference runs on %s failed; the estimate stays unmeasured", self.device)
        finally:
            with self._lock:
                self._calibrating = False
                self._busy[0] = False  # only worker 0 measures
                self._wake.notify_all()

    def _expire(self, job: _Job) -> None:
        """The wall-clock limit passed: stop the job as its requester's Stop would, keeping its steps; a job
        that spent some of that time paused gets it back (a new timer for what is left)."""
        with self._lock:
            if job.state != "running" or job.stop.is_set():
                return
            now = time.monotonic()
            paused = job.paused_seconds + (now - job.paused_since if job.paused_since is not None else 0.0)
            left = job.limit_seconds - (now - (job.started or now) - paused)
            if left > 0:
                timer = threading.Timer(left, self._expire, args=(job,))
                timer.daemon = True
                timer.start()
                return
            job.timed_out = job.keep_partial = True
            job.stop.set()
            self._progressed.notify_all()

    def _train(self, job: _Job, child: TrainingProcess | None) -> None:
        with self._lock:
            job.started = time.monotonic()
        timer = threading.Timer(job.limit_seconds, self._expire, args=(job,))
        timer.daemon = True
        timer.start()
        try:
            if child is None:
                state, stored = self._train_here(job)
            else:
                state, stored = child.train(job.config, self._report(job), job.stop, lambda: self._keep(job),
                                            lambda: self._commands(job), lambda view: self._view(job, view))
        except Exception as error:  # noqa: BLE001 — reported in the status, never raised out of the thread
            state, stored = "failed", None
            with self._lock:
                job.error = f"{type(error).__name__}: {' '.join(str(error).split())}"
        finally:
            timer.cancel()
        self._end(job, state, stored)

    def _end(self, job: _Job, state: State, stored: str | None) -> None:
        """The job's outcome, told to its waiters (said again, the same, after a run measured in this thread)."""
        with self._lock:
            job.state, job.stored_run_id = state, stored
            self._progressed.notify_all()
            if self._jobs.get(job.config.run_id()) is job:  # a fresh request may have replaced it
                del self._jobs[job.config.run_id()]

    def _report(self, job: _Job) -> Callable[[Progress], None]:
        def report(progress: Progress) -> None:
            with self._lock:
                job.progress = progress
                was_paused = job.gate.paused
                job.gate.took_step()  # the mirror of the child's gate counts the same steps
                self._paused_clock(job, was_paused)
                for key, value in (("step", progress.step), ("loss", progress.loss), ("accuracy", progress.accuracy)):
                    job.history[key].append(value)
                if progress.step == OBSERVED_STEPS:  # the estimate's speed: what trainings take here
                    observe(job.config, progress.elapsed_seconds / progress.step, self.device)
                if progress.probe is not None:  # the horizon and m_out predicted from the weights (the live view)
                    probe = progress.probe
                    for key, value in (("probe_step", probe.step), ("horizon", probe.horizon), ("m_out", probe.m_out),
                                       ("probe_ceiling", probe.ceiling), ("train_length", probe.train_length),
                                       ("probe_seconds", probe.seconds)):
                        job.history.setdefault(key, []).append(value)
                self._progressed.notify_all()

        return report

    def _view(self, job: _Job, view: LiveView) -> None:
        with self._lock:
            job.view = view
            self._progressed.notify_all()

    def _commands(self, job: _Job) -> list[tuple[str, int]]:
        """The pause / resume / advance commands for the job's child, each handed over once."""
        with self._lock:
            commands, job.commands = job.commands, []
            return commands

    def _keep(self, job: _Job) -> bool:
        """A stopped job is saved when its requester pressed Stop, not when it went away."""
        with self._lock:
            return job.keep_partial

    def _train_here(self, job: _Job) -> tuple[State, str | None]:
        training = self._trainer(job.config, self.device)
        report = self._report(job)
        steps, viewed = iter(training), 0
        while True:
            with self._lock:
                paused = job.gate.paused
            if view_due(training.steps_done, viewed, paused):
                viewed = training.steps_done
                if (seen := live_view(training.model, training.config, viewed)) is not None:
                    self._view(job, seen)
            with self._lock:  # paused: wait for resume, a step or stop; paced: for the pace too
                while not job.stop.is_set() and (not job.gate.may_step() or job.gate.delay(time.monotonic()) > 0):
                    self._progressed.wait(job.gate.delay(time.monotonic()) if job.gate.may_step() else None)
                job.gate.starting(time.monotonic())
                job.commands.clear()  # no child to send them to: the gate itself is the job's
            if job.stop.is_set() and training.steps_done:  # a stopped run keeps at least one step
                break
            if (progress := next(steps, None)) is None:
                break
            report(progress)
            if progress.finished or job.stop.is_set():
                break
        run = training.finish()
        if job.stop.is_set() and not self._keep(job):
            return "cancelled", None
        return "done", save_run(self.store, run, lambda run_id: self._end(job, "done", run_id))  # done, then measured


def _stop_note(job: _Job, pause_seconds: float) -> str | None:
    """Why the server stopped a job, and what it kept (None: it did not)."""
    kept = f"the {job.progress.step if job.progress else 0} steps done were kept"
    if job.timed_out:
        return f"stopped at this server's wall-clock limit of {job.limit_seconds:.0f} s per training ({TRAIN_SECONDS_ENV}); {kept}"
    if job.paused_out:
        return (f"stopped after {pause_seconds:.0f} s paused in all, this server's limit for a paused training "
                f"({PAUSE_SECONDS_ENV}: a paused training holds a worker); {kept}")
    return None

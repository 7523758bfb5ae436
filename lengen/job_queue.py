"""Queueing: tickets for requests, identical requests merged, the order jobs start in, who may drive them,
and when a held or paused job is let go.

Each request holds a ticket; a job runs while any ticket on it is held, and is cancelled (queued:
dropped; running: stopped at the next step, nothing saved) when the last ticket is released. A request
for a stored run is answered from the store; one for a run queued or running joins that job. New jobs
wait first in, first out, at most `max_queue` of them, one at a time per owner (a browser) and at most
`runs_per_owner` in all per owner. A job paused for `pause_seconds` in all is stopped with its steps kept.

The queue's lock is the pool's: its conditions tell the workers (lengen.pool_workers) that a job is
waiting (`wake`) and the requesters that a job moved (`progressed`).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque

from lengen.budget import Budgets
from lengen.job import Job, JobStatus, SharedTraining, State
from lengen.stepping import Pace
from lengen.store import RunStore
from lengen_core.config import RunConfig

RUNS_PER_OWNER_ENV = "LENGEN_RUNS_PER_BROWSER"


class QueueFull(RuntimeError):
    """Too many trainings are waiting; the message says how many and what to do."""


class OwnerBusy(RuntimeError):
    """This requester (a browser) already has a training running or waiting; the message says which."""


class JobQueue:
    """The pool's jobs by ticket and by run id, and the line of those waiting for a worker."""

    def __init__(self, store: RunStore, max_queue: int, runs_per_owner: int, pause_seconds: float) -> None:
        self.store = store
        self.max_queue, self.runs_per_owner, self.pause_seconds = max_queue, runs_per_owner, pause_seconds
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)  # a job is waiting, or the pool closed
        self.progressed = threading.Condition(self.lock)  # a job reported a step, was commanded or ended
        self.waiting: deque[Job] = deque()
        self.jobs: dict[str, Job] = {}  # active (queued or running) by run id
        self.closed = False
        self._tickets: dict[int, Job] = {}
        self._numbers = itertools.count(1)
        self._owner_runs: dict[str, int] = {}  # trainings started per owner since the server started

    def submit(self, config: RunConfig, owner: str | None, pace: Pace | None, limit_seconds: float | None) -> int:
        """A ticket for this config's run: answered from the store, joined to a queued or running job, or a new
        job queued with the wall-clock limit `limit_seconds` (None: the budget's). Raises StoreError, OwnerBusy
        or QueueFull before anything is queued."""
        run_id = config.run_id()
        with self.lock:
            ticket = next(self._numbers)
            job = self.jobs.get(run_id)
            if job is not None and job.stop.is_set() and not job.keep_partial:
                job = None  # being cancelled (its last holder left): a fresh request trains anew
            if job is None and self.store.exists(run_id):
                job = Job(config, state="done", stored_run_id=run_id, from_store=True)
            elif job is None:
                self.store.check_can_save(config)  # read-only, full or over quota: say so before training
                self._check_owner(owner)
                if len(self.waiting) >= self.max_queue:
                    waiting = len(self.waiting)
                    raise QueueFull(
                        f"{waiting} training{' is' if waiting == 1 else 's are'} already waiting (the limit is "
                        f"{self.max_queue}); try again in a minute or open a stored run"
                    )
                job = Job(config, owner=owner, limit_seconds=limit_seconds or Budgets.from_env().train_seconds)
                if owner is not None:
                    self._owner_runs[owner] = self._owner_runs.get(owner, 0) + 1
                self.jobs[run_id] = job
                for command in (pace or Pace()).commands():  # before it starts: its first step is already paced
                    self._apply(job, command)
                self.waiting.append(job)
                self.wake.notify_all()  # the first idle worker in order takes it
            job.tickets.add(ticket)
            self._tickets[ticket] = job
            return ticket

    def _check_owner(self, owner: str | None) -> None:
        """OwnerBusy when `owner` has a training queued or running, or has started its limit of them."""
        if owner is None:
            return
        mine = next((j for j in self.jobs.values() if j.owner == owner and j.active), None)
        if mine is not None:
            raise OwnerBusy(f"this browser already has a training {mine.state} ({mine.config.run_id()}); one at a "
                            "time per browser: wait for it or stop it first")
        if self._owner_runs.get(owner, 0) >= self.runs_per_owner:
            raise OwnerBusy(f"this browser has started {self.runs_per_owner} trainings on this server, its limit "
                            f"({RUNS_PER_OWNER_ENV}); open a stored run or a preset instead")

    def status(self, ticket: int) -> JobStatus:
        with self.lock:
            job = self._job(ticket)
            position = next((i + 1 for i, queued in enumerate(self.waiting) if queued is job), None)
            return job.status(ticket, position, self.pause_seconds)

    def wait_for_first_step(self, ticket: int, timeout: float) -> None:
        """Until a running job has reported its first step or ended, at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.lock:
            job = self._job(ticket)
            while job.state == "running" and job.progress is None and (left := deadline - time.monotonic()) > 0:
                self.progressed.wait(left)

    def stop(self, ticket: int) -> None:
        """The driver's Stop keeps the steps trained so far; another holder's lets go of its own ticket."""
        with self.lock:
            job = self._job(ticket)
            drives = job.drives(ticket)
            if drives:
                job.keep_partial = True
                self._halt(job)
        if not drives:
            self.release(ticket)

    def release(self, ticket: int) -> None:
        """The requester is gone: cancel the job if no other requester holds it."""
        with self.lock:
            job = self._tickets.pop(ticket, None)
            if job is None:
                return
            job.tickets.discard(ticket)
            if not job.tickets and job.state in ("queued", "running"):
                self._halt(job)

    def command(self, ticket: int, command: tuple[str, float]) -> None:
        """Pause, resume, advance or pace the job from its driver (SharedTraining from another holder)."""
        with self.lock:
            job = self._job(ticket)
            if job.state not in ("queued", "running"):
                return  # it has ended: nothing to hold
            if not job.drives(ticket):
                others = len(job.tickets) - 1
                raise SharedTraining(f"this training is shared with {others} other request{'s' * (others != 1)} for "
                                     "the same run; the one that asked first pauses, steps and resumes it")
            self._apply(job, command)

    def owned(self, owner: str) -> int | None:
        """The earliest ticket still held on `owner`'s queued or running training (None: it has none)."""
        with self.lock:
            job = next((j for j in self.jobs.values() if j.owner == owner and j.active and j.tickets), None)
            return None if job is None else min(job.tickets)

    def counts(self) -> dict[str, int]:
        with self.lock:
            running = sum(job.state == "running" for job in self.jobs.values())
            return {"running": running, "queued": len(self.waiting)}

    def close(self) -> None:
        """Stop every job and wake every waiter: the workers return."""
        with self.lock:
            self.closed = True
            for job in self.jobs.values():
                job.stop.set()
            self.wake.notify_all()
            self.progressed.notify_all()

    def take(self) -> Job:
        """Under the lock, with a job waiting: the next job, now running."""
        job = self.waiting.popleft()
        job.state = "running"
        return job

    def end(self, job: Job, state: State, stored: str | None) -> None:
        """The job's outcome, told to its waiters (said again, the same, after a run measured in a worker thread)."""
        with self.lock:
            job.state, job.stored_run_id = state, stored
            self.progressed.notify_all()
            if self.jobs.get(job.config.run_id()) is job:  # a fresh request may have replaced it
                del self.jobs[job.config.run_id()]

    def time_pause(self, job: Job) -> None:
        """Under the lock, as a pause begins: stop the job once it has been paused `pause_seconds` in all."""
        self._pause_timer(job, self.pause_seconds - job.paused_seconds)

    def _apply(self, job: Job, command: tuple[str, float]) -> None:
        """Apply a command to the job's gate and queue it for its child (under the lock)."""
        if job.apply(command, time.monotonic()):
            self.time_pause(job)
        self.progressed.notify_all()  # a training in a worker thread waits on it while paused or paced

    def _pause_timer(self, job: Job, seconds: float) -> None:
        timer = threading.Timer(max(0.0, seconds), self._pause_expire, args=(job,))
        timer.daemon = True
        timer.start()

    def _pause_expire(self, job: Job) -> None:
        """A paused job's pause allowance may be spent: if so, stop it keeping its steps (a queued one is
        dropped), so a paused training cannot hold a worker for ever; if not (it was resumed and paused
        again since), look again when it would be."""
        with self.lock:
            if job.state not in ("queued", "running") or job.stop.is_set() or job.paused_since is None:
                return
            paused = job.paused_for(time.monotonic())
            if paused < self.pause_seconds:
                self._pause_timer(job, self.pause_seconds - paused)
                return
            job.paused_out = job.keep_partial = True
            self._halt(job)

    def _halt(self, job: Job) -> None:
        """Under the lock: stop the job at its next step (a paused one wakes to stop); a queued one is dropped."""
        job.stop.set()
        self.progressed.notify_all()
        if job.state == "queued":
            self.waiting.remove(job)
            job.state = "cancelled"
            if self.jobs.get(job.config.run_id()) is job:
                del self.jobs[job.config.run_id()]

    def _job(self, ticket: int) -> Job:
        job = self._tickets.get(ticket)
        if job is None:
            raise KeyError(f"unknown or released ticket {ticket}")
        return job

"""The pool's workers: threads that take jobs from the queue (lengen.job_queue), the training process each
keeps warm, the reference runs timed in the first one, and a job trained to its end or its limit.

With `isolate=True` (the server's choice) each worker runs its trainings in a child process of its own
(`lengen.training_process`, or an actor on a Ray cluster: lengen.ray_pool), so serving pages and training
never compete for one interpreter's lock; otherwise it trains in its own thread. Worker `index` takes the
next job only when every worker before it is busy, so the warm ones serve first. The first worker's
process, once warm, times the reference runs of lengen.calibration (and again, idle, when asked:
`remeasure`), so the Train form's estimate is the trainings' own machine's. A job still running at its
wall-clock limit is stopped as its requester's Stop would, keeping its steps; time spent paused is not
counted. A finished run is saved and reported done, then measured at the pages' default request by the
same worker (lengen.first_visit.save_run). Threads never raise out.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from lengen import calibration
from lengen.calibration import OBSERVED_STEPS, observe, record
from lengen.job import Job, State
from lengen.job_queue import JobQueue
from lengen.store import RunStore
from lengen.training_process import TrainingProcess, save_run
from lengen_core.analysis.watch import LiveView, live_view, view_due
from lengen_core.config import RunConfig
from lengen_core.training import Progress, Training

LOG = logging.getLogger(__name__)


class Workers:
    """`count` worker threads taking jobs from `queue`, each with its training process when `isolate`."""

    def __init__(self, queue: JobQueue, store: RunStore, count: int, device: str, isolate: bool, threads: int,
                 warm_delay: float, trainer: Callable[[RunConfig, str], Training],
                 process: Callable[[RunStore, str, int], TrainingProcess]) -> None:
        self._queue, self._store, self._device, self._isolate = queue, store, device, isolate
        self._threads, self._warm_delay, self._trainer, self._process = threads, warm_delay, trainer, process
        self._lock, self._wake, self._progressed = queue.lock, queue.wake, queue.progressed
        self._children: list[TrainingProcess] = []
        self._busy = [False] * count
        self._remeasure = False  # worker 0 times the reference runs when next idle (`remeasure`)
        self._calibrating = False
        self._calibrated_at = -float("inf")  # time.monotonic() when the last measurement began
        self._workers = [threading.Thread(target=self._work, args=(i,), name=f"lengen-train-{i}", daemon=True)
                         for i in range(count)]
        for worker in self._workers:
            worker.start()

    def remeasure(self, retry_seconds: float) -> None:
        """Worker 0 times the reference runs again when next idle, unless it is timing them or began less
        than `retry_seconds` ago."""
        with self._lock:
            if not self._calibrating and time.monotonic() - self._calibrated_at >= retry_seconds:
                self._remeasure = True
                self._wake.notify_all()

    def pids(self) -> list[int]:
        """The process ids of the live training processes (isolated workers only)."""
        with self._lock:
            return [child.pid for child in self._children if child.pid is not None]

    def join(self, timeout: float) -> None:
        for worker in self._workers:
            worker.join(timeout)

    def _work(self, index: int) -> None:
        """Worker `index` takes the next job only when every worker before it is busy, so the
        warm ones (worker 0's process starts with the pool) serve first; the others start theirs
        when the pool is first that busy."""
        queue, child = self._queue, None
        if self._isolate:
            child = self._process(self._store, self._device, self._threads)
            with self._lock:
                self._children.append(child)
            if index == 0:  # ready before the first request: a process start and a torch import take seconds
                with self._lock:  # but not while the server draws its first pages, unless work arrives first
                    self._wake.wait_for(lambda: queue.waiting or queue.closed, timeout=self._warm_delay)
                    closed = queue.closed
                    # the reference runs' speed, timed in the child once warm; a job already waiting goes first
                    self._remeasure = self._remeasure or not queue.waiting
                if not closed:
                    child.start()
        try:
            while True:
                with self._lock:
                    while not queue.closed and not (queue.waiting and all(self._busy[:index])) and not (
                            index == 0 and self._remeasure):
                        self._wake.wait()
                    if queue.closed:
                        return
                    if not (queue.waiting and all(self._busy[:index])):  # worker 0, idle, asked for the speed
                        self._remeasure, self._calibrating = False, True
                        self._calibrated_at = time.monotonic()
                        self._busy[index] = True  # a job arriving meanwhile goes to the next worker, not behind it
                        self._wake.notify_all()
                        job = None
                    else:
                        job = queue.take()
                        self._busy[index] = True
                        if queue.waiting:
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
        thread for a pool without processes; recorded for `TrainingPool.training_speed`. A failure leaves the
        speed unmeasured (the form says so) and is tried again when next asked (lengen.jobs.CALIBRATE_RETRY_SECONDS)."""
        try:
            speeds = child.calibrate() if child is not None else calibration.measure_references(self._device)
            if speeds:
                record(speeds, self._device)
        except Exception:  # never out of the worker: its trainings matter more than the estimate
            LOG.exception("timing the reference runs on %s failed; the estimate stays unmeasured", self._device)
        finally:
            with self._lock:
                self._calibrating = False
                self._busy[0] = False  # only worker 0 measures
                self._wake.notify_all()

    def _expire(self, job: Job) -> None:
        """The wall-clock limit passed: stop the job as its requester's Stop would, keeping its steps; a job
        that spent some of that time paused gets it back (a new timer for what is left)."""
        with self._lock:
            if job.state != "running" or job.stop.is_set():
                return
            now = time.monotonic()
            left = job.limit_seconds - (now - (job.started or now) - job.paused_for(now))
            if left > 0:
                timer = threading.Timer(left, self._expire, args=(job,))
                timer.daemon = True
                timer.start()
                return
            job.timed_out = job.keep_partial = True
            job.stop.set()
            self._progressed.notify_all()

    def _train(self, job: Job, child: TrainingProcess | None) -> None:
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
        self._queue.end(job, state, stored)

    def _report(self, job: Job) -> Callable[[Progress], None]:
        def report(progress: Progress) -> None:
            with self._lock:
                if job.record(progress, time.monotonic()):
                    self._queue.time_pause(job)
                if progress.step == OBSERVED_STEPS:  # the estimate's speed: what trainings take here
                    observe(job.config, progress.elapsed_seconds / progress.step, self._device)
                self._progressed.notify_all()

        return report

    def _view(self, job: Job, view: LiveView) -> None:
        with self._lock:
            job.view = view
            self._progressed.notify_all()

    def _commands(self, job: Job) -> list[tuple[str, float]]:
        """The pause / resume / advance commands for the job's child, each handed over once."""
        with self._lock:
            return job.take_commands()

    def _keep(self, job: Job) -> bool:
        """A stopped job is saved when its requester pressed Stop, not when it went away."""
        with self._lock:
            return job.keep_partial

    def _train_here(self, job: Job) -> tuple[State, str | None]:
        training = self._trainer(job.config, self._device)
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
        return "done", save_run(self._store, run, functools.partial(self._queue.end, job, "done"))  # then measured

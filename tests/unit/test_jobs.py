"""The shared training pool: concurrency limit, FIFO queue positions, merging, cancellation."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from typing import ClassVar

import pytest

from lengen.jobs import QueueFull, TrainingPool
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training
from tests.helpers.waiting import wait_for


class GatedTraining(Training):
    """A real training whose steps wait for a gate, so tests decide when jobs progress."""

    gates: ClassVar[dict[str, threading.Event]] = {}
    running = 0
    most_running = 0
    lock = threading.Lock()

    def __iter__(self):
        gate = self.gates.setdefault(self.config.run_id(), threading.Event())
        with GatedTraining.lock:
            GatedTraining.running += 1
            GatedTraining.most_running = max(GatedTraining.most_running, GatedTraining.running)
        try:
            for progress in super().__iter__():
                gate.wait(10)
                yield progress
        finally:
            with GatedTraining.lock:
                GatedTraining.running -= 1


def config(seed: int, steps: int = 5) -> RunConfig:
    return with_changes(RunConfig(), steps=steps, seed=seed)


wait_for = functools.partial(wait_for, timeout=20.0)  # this module's trainings' deadline


@pytest.fixture
def pool(tmp_path):
    GatedTraining.gates.clear()
    GatedTraining.running = GatedTraining.most_running = 0
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=2, device="cpu", trainer=GatedTraining)
    yield pool
    for gate in GatedTraining.gates.values():
        gate.set()
    pool.close()


def test_at_most_the_limit_runs_and_the_rest_queue_in_order(pool):
    tickets = [pool.submit(config(seed)) for seed in range(5)]
    wait_for(lambda: pool.counts()["running"] == 2)
    assert [pool.status(t).position for t in tickets] == [None, None, 1, 2, 3]
    assert [pool.status(t).state for t in tickets] == ["running", "running", "queued", "queued", "queued"]
    for seed in range(5):
        GatedTraining.gates.setdefault(config(seed).run_id(), threading.Event()).set()
    wait_for(lambda: all(pool.status(t).state == "done" for t in tickets))
    assert GatedTraining.most_running == 2
    for ticket in tickets:
        status = pool.status(ticket)
        assert status.stored_run_id == status.run_id and pool.store.exists(status.run_id)
        assert status.progress.step == 5 and status.history["step"] == [1, 2, 3, 4, 5]


def test_identical_requests_share_one_job_and_a_stored_run_is_answered_at_once(pool):
    first, second = pool.submit(config(7)), pool.submit(config(7))
    GatedTraining.gates.setdefault(config(7).run_id(), threading.Event()).set()
    wait_for(lambda: pool.status(first).state == "done")
    assert pool.status(second).state == "done" and pool.status(second).stored_run_id == config(7).run_id()
    later = pool.submit(config(7))
    status = pool.status(later)
    assert status.state == "done" and status.from_store and status.stored_run_id == config(7).run_id()


def test_releasing_the_last_ticket_cancels_without_saving(pool):
    shared = [pool.submit(config(1)), pool.submit(config(1))]
    queued = pool.submit(config(2)), pool.submit(config(3))
    wait_for(lambda: pool.status(shared[0]).state == pool.status(queued[0]).state == "running")
    pool.release(queued[1])  # queued, no other holder: dropped from the queue
    assert pool.counts()["queued"] == 0
    pool.release(shared[0])  # another ticket still holds it: keeps running
    assert pool.status(shared[1]).state == "running"
    pool.release(shared[1])
    GatedTraining.gates.setdefault(config(1).run_id(), threading.Event()).set()
    wait_for(lambda: not pool.store.exists(config(1).run_id()) and pool.counts()["running"] <= 1)
    GatedTraining.gates.setdefault(config(2).run_id(), threading.Event()).set()
    wait_for(lambda: pool.status(queued[0]).state == "done")
    assert not pool.store.exists(config(1).run_id())
    assert not pool.store.exists(config(3).run_id())
    with pytest.raises(KeyError):
        pool.status(shared[1])


def test_stop_keeps_the_steps_trained_so_far_as_their_own_run(pool):
    ticket = pool.submit(config(4, steps=50))
    gate = GatedTraining.gates.setdefault(config(4, steps=50).run_id(), threading.Event())
    wait_for(lambda: pool.status(ticket).state == "running")
    pool.stop(ticket)
    gate.set()
    wait_for(lambda: pool.status(ticket).state == "done")
    status = pool.status(ticket)
    assert status.stopped and status.stored_run_id != status.run_id
    run = pool.store.load(status.stored_run_id)
    assert run.steps == run.config.train.steps < 50


def test_a_full_queue_is_a_clear_error(tmp_path):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", max_queue=2, trainer=GatedTraining)
    try:
        tickets = [pool.submit(config(0))]
        wait_for(lambda: pool.status(tickets[0]).state == "running")
        tickets += [pool.submit(config(seed)) for seed in (1, 2)]
        assert pool.counts() == {"running": 1, "queued": 2, "limit": 1}
        with pytest.raises(QueueFull, match="2 trainings are already waiting"):
            pool.submit(config(99))
        assert pool.status(tickets[2]).position == 2
    finally:
        for gate in GatedTraining.gates.values():
            gate.set()
        pool.close()


def test_a_failing_training_is_reported_not_raised(tmp_path):
    def broken(config, device):
        raise RuntimeError("out of\nmemory")

    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", trainer=broken)
    try:
        ticket = pool.submit(config(5))
        wait_for(lambda: pool.status(ticket).state == "failed")
        assert pool.status(ticket).error == "RuntimeError: out of memory"
        assert pool.counts()["running"] == 0
    finally:
        pool.close()


def test_asking_again_while_a_released_job_winds_down_trains_anew(pool):
    first = pool.submit(config(8))
    wait_for(lambda: pool.status(first).state == "running")
    pool.release(first)  # stop flag set; the loop has not seen it yet (its gate is closed)
    again = pool.submit(config(8))
    assert pool.status(again).state in ("queued", "running")
    GatedTraining.gates.setdefault(config(8).run_id(), threading.Event()).set()
    wait_for(lambda: pool.status(again).state == "done")
    assert pool.store.exists(config(8).run_id())


# Isolated trainings (the server's mode): each worker trains in a child process of its own.


@pytest.fixture
def isolated(tmp_path):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", isolate=True)
    yield pool
    pool.close()


def long_config(seed: int) -> RunConfig:
    return with_changes(RunConfig(), steps=50_000, seed=seed, keep_training=True)


def test_an_isolated_training_streams_progress_and_saves_in_the_child(isolated):
    ticket = isolated.submit(config(21, steps=12))
    wait_for(lambda: isolated.status(ticket).state == "done", timeout=120)
    status = isolated.status(ticket)
    assert status.history["step"] == list(range(1, 13))
    assert status.progress is not None and status.progress.finished
    assert isolated.store.load(status.stored_run_id).steps == 12


def test_an_isolated_training_stops_and_keeps_or_cancels_and_drops(isolated):
    kept = isolated.submit(long_config(22))
    wait_for(lambda: (isolated.status(kept).progress or 0) and isolated.status(kept).progress.step >= 3, timeout=120)
    isolated.stop(kept)
    wait_for(lambda: isolated.status(kept).state == "done", timeout=60)
    stored = isolated.status(kept).stored_run_id
    assert stored != long_config(22).run_id() and isolated.store.load(stored).steps >= 3

    dropped = isolated.submit(long_config(23))
    wait_for(lambda: isolated.status(dropped).progress is not None, timeout=60)
    isolated.release(dropped)
    wait_for(lambda: isolated.counts()["running"] == 0, timeout=60)
    assert [s.run_id for s in isolated.store.list_runs()] == [stored]


def test_a_killed_training_process_fails_its_job_and_the_next_job_gets_a_fresh_one(isolated):
    ticket = isolated.submit(long_config(24))
    wait_for(lambda: isolated.status(ticket).progress is not None, timeout=120)
    (pid,) = isolated.training_pids()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: isolated.status(ticket).state == "failed", timeout=60)
    assert "training process ended unexpectedly" in isolated.status(ticket).error
    assert "nothing was saved" in isolated.status(ticket).error
    again = isolated.submit(config(25, steps=4))
    wait_for(lambda: isolated.status(again).state == "done", timeout=120)
    assert isolated.store.exists(config(25, steps=4).run_id())


def test_the_status_after_the_first_step_waits_for_it_and_no_longer_than_asked(pool):
    ticket = pool.submit(config(11))
    gate = GatedTraining.gates.setdefault(config(11).run_id(), threading.Event())
    wait_for(lambda: pool.status(ticket).state == "running")
    start = time.monotonic()
    status = pool.status_after_first_step(ticket, timeout=0.3)  # the gate is shut: no step comes
    assert status.progress is None and 0.25 <= time.monotonic() - start < 5
    threading.Timer(0.2, gate.set).start()
    start = time.monotonic()
    status = pool.status_after_first_step(ticket, timeout=30)
    assert status.progress is not None and status.progress.step >= 1
    assert time.monotonic() - start < 10  # woken by the step, not by the timeout


def test_a_job_arriving_while_the_first_worker_times_the_reference_runs_goes_to_the_next_worker(pool, monkeypatch):
    """Worker 0 times the reference runs when idle (lengen.calibration); it counts as busy meanwhile,
    so a Train click then is taken by worker 1 instead of waiting behind the measurement (on a loaded machine,
    a child's measurement can take a minute)."""
    from lengen import calibration

    measuring, release, measured = threading.Event(), threading.Event(), threading.Event()

    def slow_references(device):
        measuring.set()
        release.wait(60)
        measured.set()
        return {}

    monkeypatch.setattr(calibration, "measure_references", slow_references)
    monkeypatch.setattr(calibration, "_measured", {})  # no speed yet in this process: the pool measures
    try:
        assert pool.training_speed(config(7)) is None
        assert measuring.wait(20), "worker 0 did not start timing the reference runs"
        ticket = pool.submit(config(8))
        wait_for(lambda: pool.status(ticket).state == "running")
        assert not measured.is_set()  # taken while the measurement still ran
    finally:
        release.set()

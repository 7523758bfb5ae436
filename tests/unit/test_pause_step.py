"""Pause, single-step and resume a live training (lengen.stepping.StepGate and the pool's
commands): each step press advances the step count by exactly its steps, nothing moves while paused,
a paused run shows its carrier and attention map where it stopped (lengen_core.analysis.watch), and a resumed
run, watched on the way, ends with the very weights an uninterrupted run of the same seed has (CPU)."""

from __future__ import annotations

import time

import pytest
import torch

from lengen.jobs import TrainingPool
from lengen.stepping import MAX_ADVANCE, StepGate
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from tests.helpers.waiting import wait_for


def steps_done(pool: TrainingPool, ticket: int) -> int:
    progress = pool.status(ticket).progress
    return 0 if progress is None else progress.step


def settled(pool: TrainingPool, ticket: int, seconds: float = 0.4) -> int:
    """The step count once it has not moved for `seconds` (a paused training takes no step)."""
    while True:
        before = steps_done(pool, ticket)
        time.sleep(seconds)
        if steps_done(pool, ticket) == before:
            return before


def config(seed: int, steps: int = 40) -> RunConfig:
    return with_changes(RunConfig(), steps=steps, seed=seed, keep_training=True)  # no early stop: every step runs


def test_the_gate_lets_through_exactly_what_it_is_told():
    gate = StepGate()
    assert gate.may_step() and not gate.paused
    gate.pause()
    assert not gate.may_step() and gate.paused
    gate.advance(2)
    taken = 0
    while gate.may_step():
        gate.took_step()
        taken += 1
    assert taken == 2 and gate.paused
    gate.resume()
    assert gate.may_step() and not gate.paused
    for bad in (0, -1, MAX_ADVANCE + 1, 1.5, True):
        with pytest.raises(ValueError, match=f"whole number from 1 to {MAX_ADVANCE}"):
            gate.advance(bad)
    with pytest.raises(ValueError, match="allowed pause, resume, advance"):
        gate.apply(("rewind", 1))


@pytest.mark.parametrize("isolate", [False, pytest.param(True, marks=pytest.mark.slow)],  # the thread: the quick one
                         ids=["thread", "child-process"])
def test_single_steps_advance_by_exactly_one_and_resume_reaches_the_uninterrupted_weights(tmp_path, isolate):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", isolate=isolate)
    try:
        wanted = config(31 + isolate)
        ticket = pool.submit(wanted)
        pool.pause(ticket)
        wait_for(lambda: pool.status(ticket).paused, timeout=120)
        start = settled(pool, ticket)
        assert start < wanted.train.steps - 12 and pool.status(ticket).state == "running"
        for expected in range(start + 1, start + 4):  # Step, three times: one step each
            pool.advance(ticket, 1)
            wait_for(lambda e=expected: steps_done(pool, ticket) == e)
            assert settled(pool, ticket) == expected and pool.status(ticket).paused
        pool.advance(ticket, 10)
        wait_for(lambda: steps_done(pool, ticket) == start + 13)
        assert settled(pool, ticket) == start + 13
        assert pool.status(ticket).history["step"] == list(range(1, start + 14))  # each step reported once
        wait_for(lambda: (view := pool.status(ticket).view) is not None and view.step == start + 13)
        view = pool.status(ticket).view  # where it paused: the carrier and the map at 4× from those weights
        assert view.analytic and view.carrier.shape == (128,) and view.heatmap.length == 4 * 16
        pool.resume(ticket)
        wait_for(lambda: pool.status(ticket).state == "done", timeout=120)
        status = pool.status(ticket)
        assert status.stored_run_id == wanted.run_id() and not status.paused
        resumed = pool.store.load(status.stored_run_id, "cpu")
    finally:
        pool.close()
    uninterrupted = train(wanted, "cpu")
    assert resumed.steps == uninterrupted.steps == wanted.train.steps
    weights, reference = resumed.model.state_dict(), uninterrupted.model.state_dict()
    assert weights.keys() == reference.keys()
    for name in weights:
        assert torch.equal(weights[name].cpu(), reference[name].cpu()), name


def test_a_paused_training_stops_and_keeps_its_steps(tmp_path):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu")
    try:
        ticket = pool.submit(config(35))
        pool.pause(ticket)
        pool.advance(ticket, 5)
        wait_for(lambda: steps_done(pool, ticket) == 5)
        pool.stop(ticket)  # Stop while paused: saved with the 5 steps done
        wait_for(lambda: pool.status(ticket).state == "done")
        assert pool.store.load(pool.status(ticket).stored_run_id).steps == 5
    finally:
        pool.close()


def test_time_spent_paused_is_not_charged_to_the_wall_clock_limit(tmp_path):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", train_seconds=1.0)
    try:
        ticket = pool.submit(config(36, steps=50_000))
        pool.pause(ticket)
        wait_for(lambda: pool.status(ticket).state == "running")
        time.sleep(1.6)  # paused past the 1 s limit
        status = pool.status(ticket)
        assert status.state == "running" and not status.stopped and status.note is None
        pool.advance(ticket, 2)
        wait_for(lambda: steps_done(pool, ticket) == 2)
        pool.resume(ticket)  # about 1 s of training is left: then it stops at the limit, keeping its steps
        wait_for(lambda: pool.status(ticket).state == "done", timeout=30)
        assert "wall-clock limit of 1 s" in pool.status(ticket).note
    finally:
        pool.close()


def test_a_training_paused_past_the_servers_limit_is_stopped_and_keeps_its_steps(tmp_path):
    """A paused training holds a worker: after `pause_seconds` paused in all (LENGEN_PAUSE_SECONDS) the
    pool stops it, keeps the steps done and says why; time running does not count, nor a pause resumed."""
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", pause_seconds=1.5)
    try:
        wanted = config(41, steps=400)
        ticket = pool.submit(wanted)
        wait_for(lambda: steps_done(pool, ticket) >= 1)
        pool.pause(ticket)
        time.sleep(0.8)  # paused 0.8 s of the 1.5 allowed, then resumed: still running
        pool.resume(ticket)
        before = steps_done(pool, ticket)
        wait_for(lambda: steps_done(pool, ticket) > before)
        assert pool.status(ticket).state == "running"
        pool.pause(ticket)
        kept = settled(pool, ticket, seconds=0.2)
        wait_for(lambda: pool.status(ticket).state not in ("queued", "running"), timeout=30)
        status = pool.status(ticket)
        assert status.state == "done" and status.stopped
        assert "paused in all" in status.note and "LENGEN_PAUSE_SECONDS" in status.note
        assert f"the {kept} steps done were kept" in status.note
        assert RunStore(tmp_path).load(status.stored_run_id).config.train.steps == kept
    finally:
        pool.close()


def test_a_shared_training_is_driven_by_the_request_that_came_first(tmp_path):
    """A class on one link asks for the same run: one training, which the first request pauses, steps and
    stops; another holder cannot pause it, and its Stop only lets go of its own ticket."""
    from lengen.jobs import SharedTraining

    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu")
    try:
        wanted = config(51, steps=400)
        first, second, third = (pool.submit(wanted, owner=f"browser-{i}") for i in range(3))
        wait_for(lambda: steps_done(pool, first) >= 1)
        assert [pool.status(t).drives for t in (first, second, third)] == [True, False, False]
        assert pool.status(second).holders == 3
        with pytest.raises(SharedTraining, match="shared with 2 other requests for the same run"):
            pool.pause(second)
        assert not pool.status(first).paused
        pool.stop(second)  # leaves: the training goes on for the others
        before = steps_done(pool, first)
        wait_for(lambda: steps_done(pool, first) > before)
        assert pool.status(first).state == "running" and pool.status(third).holders == 2
        with pytest.raises(KeyError):
            pool.status(second)
        pool.pause(first)
        wait_for(lambda: pool.status(third).paused)
        pool.release(first)  # the driver leaves: the next holder drives
        assert pool.status(third).drives and pool.status(third).holders == 1
        pool.advance(third, 1)
        kept = settled(pool, third, seconds=0.2)
        pool.stop(third)
        wait_for(lambda: pool.status(third).state not in ("queued", "running"), timeout=30)
        assert pool.status(third).state == "done"
        assert RunStore(tmp_path).load(pool.status(third).stored_run_id).config.train.steps == kept
    finally:
        pool.close()


def test_a_pace_is_checked_and_spaces_the_steps_it_lets_through():
    from lengen.stepping import MAX_STEPS_PER_SECOND, MIN_STEPS_PER_SECOND, Pace, PaceError

    assert Pace().commands() == [] and not Pace().paced
    assert Pace(start_paused=True, steps_per_second=10).commands() == [("pace", 10.0), ("pause", 0)]
    for bad in (-1, 0.01, MAX_STEPS_PER_SECOND * 2, float("nan"), "fast", True):
        with pytest.raises(PaceError, match=f"0 \\(as fast as possible\\) or a number from {MIN_STEPS_PER_SECOND:g}"):
            Pace(steps_per_second=bad)
    with pytest.raises(PaceError, match="start paused must be true or false"):
        Pace(start_paused="yes")
    assert Pace(steps_per_second=4).seconds(100, 0.01) == pytest.approx(25.0)  # the pace is slower than the steps
    assert Pace(steps_per_second=4).seconds(100, 0.5) == pytest.approx(50.0)  # the steps are slower than the pace
    gate = StepGate()
    gate.apply(("pace", 4))
    assert gate.delay(100.0) == 0  # no step yet: the first goes at once
    gate.starting(100.0)
    assert gate.delay(100.1) == pytest.approx(0.15) and gate.delay(100.3) == 0
    gate.apply(("pace", 0))  # as fast as possible again
    assert gate.delay(100.1) == 0
    with pytest.raises(PaceError):
        gate.apply(("pace", -2))


@pytest.mark.parametrize("isolate", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["thread", "child-process"])
def test_a_paced_run_started_paused_keeps_its_pace_and_reaches_the_unpaced_weights(tmp_path, isolate):
    """Started paused, it takes no step until told; Step still moves exactly one step; resumed at 40 steps a
    second its 40 steps take at least a second; its weights are those of an unpaced run, bit for bit."""
    from lengen.stepping import Pace

    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", isolate=isolate)
    try:
        wanted = config(33 + isolate)
        ticket = pool.submit(wanted, pace=Pace(start_paused=True, steps_per_second=40))
        wait_for(lambda: pool.status(ticket).state == "running", timeout=120)
        time.sleep(0.5)
        status = pool.status(ticket)
        assert status.paused and status.progress is None and status.steps_per_second == 40
        pool.advance(ticket, 1)
        wait_for(lambda: steps_done(pool, ticket) == 1)
        assert settled(pool, ticket) == 1 and pool.status(ticket).paused
        started = time.monotonic()
        pool.resume(ticket)
        wait_for(lambda: pool.status(ticket).state == "done", timeout=120)
        took = time.monotonic() - started
        assert took >= (wanted.train.steps - 2) / 40, took  # 39 steps, no sooner than one every 1/40 s
        resumed = pool.store.load(pool.status(ticket).stored_run_id, "cpu")
    finally:
        pool.close()
    unpaced = train(wanted, "cpu")
    weights, reference = resumed.model.state_dict(), unpaced.model.state_dict()
    assert resumed.steps == unpaced.steps == wanted.train.steps
    for name in reference:
        assert torch.equal(weights[name].cpu(), reference[name].cpu()), name


def test_the_pace_changes_while_it_runs_and_a_bad_one_is_refused(tmp_path):
    from lengen.stepping import PaceError

    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu")
    try:
        ticket = pool.submit(config(37, steps=2_000))
        wait_for(lambda: steps_done(pool, ticket) >= 1)
        pool.set_pace(ticket, 5)
        assert pool.status(ticket).steps_per_second == 5
        before = steps_done(pool, ticket)
        time.sleep(1.0)
        assert steps_done(pool, ticket) - before <= 7  # about 5 in a second (one may have been under way)
        with pytest.raises(PaceError, match="steps per second must be"):
            pool.set_pace(ticket, 5_000)
        assert pool.status(ticket).steps_per_second == 5
    finally:
        pool.close()

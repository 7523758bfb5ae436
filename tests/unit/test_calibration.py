"""The training estimate is the trainings' machine's (lengen.calibration): the cost model's shape,
scaled by a few timed steps of a reference run per kind of model, timed in the pool's training process (never
in the server's), lands within 3× of real trainings; until that measurement arrives the form says the figure
is the model's; a pace makes the estimate steps / pace when it is the slower, and the budget check counts it."""

from __future__ import annotations

import functools
import time

import pytest

from lengen import calibration, jobs
from lengen.budget import BudgetError, Budgets, check, shortest_training_steps, training_cost
from lengen.calibration import REMEASURE_SECONDS, TIMED, TRAINED, record, training_speed
from lengen.stepping import UNPACED, Pace
from lengen.store import RunStore
from lengen.training_process import live_training
from lengen_core.config import RunConfig, with_changes
from tests.helpers.waiting import wait_for

TRANSFORMER = with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2)


@pytest.fixture(autouse=True)
def fresh_measurements():
    """Each test measures anew (a speed measured by an earlier test is from another moment's load)."""
    calibration._measured.clear()
    calibration._sources.clear()
    yield
    calibration._measured.clear()
    calibration._sources.clear()


wait_for = functools.partial(wait_for, timeout=120.0)  # this module's trainings' deadline


def test_a_speed_is_read_per_kind_and_is_old_after_remeasure_seconds():
    head = RunConfig()
    assert training_speed(head, "cpu") is None  # nothing timed yet: no number passes for a measured one
    record({"single head": 0.5, "transformer": 0.25}, "cpu", now=1e9)
    speed = training_speed(with_changes(head, seed=9, encoding="learned"), "cpu", now=1e9 + 1)
    assert (speed.factor, speed.source, speed.old) == (0.5, TIMED, False)
    assert training_speed(TRANSFORMER, "cpu", now=1e9 + 1).factor == 0.25
    assert training_speed(head, "cpu", now=1e9 + REMEASURE_SECONDS + 1).old  # kept, and measured again
    assert training_speed(head, "cuda") is None  # per device


def test_the_reference_runs_are_timed_in_the_training_process_never_here(tmp_path, monkeypatch):
    """Issue 28: timing them in the server's script thread cost 1.8 CPU s with the interpreter lock held."""
    def not_here(*args, **kwargs):
        raise AssertionError("the reference runs were timed in the server's process")

    monkeypatch.setattr(calibration, "measured_step_seconds", not_here)
    monkeypatch.setattr(jobs, "CALIBRATE_RETRY_SECONDS", 0.0)
    pool = jobs.TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", isolate=True)
    try:
        first = wait_for(lambda: pool.training_speed(RunConfig()))  # the warm-up's answer
        assert first.source == TIMED and 0 < first.factor < 100 and not first.old
        assert pool.training_speed(TRANSFORMER).source == TIMED
        timed_at = calibration._measured["single head", "cpu"][0]
        record({"single head": first.factor}, "cpu", now=time.monotonic() - REMEASURE_SECONDS - 1)
        assert pool.training_speed(RunConfig()).old  # the old figure still answers, and asks for a new one
        wait_for(lambda: not pool.training_speed(RunConfig()).old)
        assert calibration._measured["single head", "cpu"][0] > timed_at  # timed again, in the child
    finally:
        pool.close()


def test_a_calibrate_that_gave_up_is_not_asked_again_behind_itself(tmp_path):
    """A child still importing torch at a heavy load answers in order: asking again while its first answer is
    due would queue a second measurement before the next training."""
    from lengen.training_process import TrainingProcess

    child = TrainingProcess(RunStore(tmp_path), "cpu", 1)
    try:
        assert child.calibrate(timeout=0.01) is None  # still starting: given up, not forgotten
        speeds = child.calibrate(timeout=120)
        assert speeds is not None and set(speeds) == {"single head", "transformer"}
        assert not child._conn.poll(1.0)  # one answer: one question was sent
    finally:
        child.close()


def test_the_form_says_when_its_figure_is_the_cost_models_own():
    from ui.training.form import estimate_text

    budgets = Budgets(3 << 30, 120.0, 1_800.0)
    unmeasured = estimate_text(RunConfig(), UNPACED, None, budgets)
    assert "not measured yet" in unmeasured and "measured speed" not in unmeasured
    assert "not measured yet" in estimate_text(RunConfig(), UNPACED, None, budgets, brief=True)
    measured = estimate_text(RunConfig(), UNPACED, calibration.Speed(0.5, TIMED), budgets)
    assert f"from its measured speed ({TIMED})" in measured and "not measured" not in measured


@pytest.mark.slow  # trains two runs
@pytest.mark.serial  # a ratio of two timings: not beside another worker whose load comes and goes
@pytest.mark.parametrize("changes", [dict(encoding="learned", d_model=64, steps=150),
                                     dict(task="retrieval", n_layers=2, n_heads=2, d_model=64, steps=40)],
                         ids=["single-head", "transformer"])
def test_the_estimate_is_within_3x_of_a_measured_training(tmp_path, changes):
    config = with_changes(RunConfig(), keep_training=True, seed=3, **changes)  # every step runs
    record(calibration.measure_references("cpu"), "cpu")  # as the training process times them, at one thread
    estimate = training_cost(config, speed=training_speed(config, "cpu").factor).seconds
    training = live_training(config, "cpu", RunStore(tmp_path))  # as the server trains it: with its live probes
    started = time.perf_counter()
    for _ in training:
        pass
    measured = time.perf_counter() - started
    assert measured / 3 <= estimate <= 3 * measured, (estimate, measured)


def test_a_pace_sets_the_time_when_it_is_slower_than_the_steps_and_the_check_counts_it():
    config = with_changes(RunConfig(), steps=1_500)
    fast = training_cost(config)
    paced = training_cost(config, Pace(steps_per_second=10))
    assert fast.seconds < 150 and paced.seconds == pytest.approx(150)  # 1 500 steps at 10 a second
    assert shortest_training_steps(config) == config.train.patience  # early stopping needs the patience
    assert shortest_training_steps(with_changes(config, keep_training=True)) == 1_500
    with pytest.raises(BudgetError, match="a faster pace"):
        check(training_cost(config, Pace(steps_per_second=0.5)), Budgets(3 << 30, 120.0, 1_800.0))  # 3 000 s


def test_a_trainings_own_step_time_becomes_the_speed_of_its_kind(tmp_path):
    """A measurement taken while the server starts can be slow: the pool corrects it from its trainings."""
    config = with_changes(RunConfig(), steps=calibration.OBSERVED_STEPS + 5, keep_training=True, seed=8)
    calibration.observe(config, 2.0, "cpu")  # as if measured on a machine 200 times slower
    assert training_speed(config, "cpu").factor > 100
    pool = jobs.TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu")
    try:
        ticket = pool.submit(config)
        wait_for(lambda: pool.status(ticket).state not in ("queued", "running"))
        assert pool.status(ticket).state == "done"
    finally:
        pool.close()
    speed = training_speed(config, "cpu")
    assert speed.factor < 60 and speed.source == TRAINED  # its own steps, not the slow measurement; the form says so

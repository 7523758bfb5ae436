"""The training estimate is this machine's (lengen_core.serving.calibration): the cost model's shape, scaled by
a few timed steps of a reference run per kind of model, lands within 3× of real trainings; a pace makes the
estimate steps / pace when it is the slower, and the budget check counts it."""

from __future__ import annotations

import time

import pytest

from lengen_core.config import RunConfig, with_changes
from lengen_core.serving import calibration
from lengen_core.serving.budget import BudgetError, Budgets, check, shortest_training_steps, training_cost
from lengen_core.serving.calibration import REMEASURE_SECONDS, training_speed
from lengen_core.serving.stepping import Pace
from lengen_core.serving.store import RunStore
from lengen_core.serving.training_process import live_training


@pytest.fixture(autouse=True)
def fresh_measurements():
    """Each test measures anew (a speed measured by an earlier test is from another moment's load)."""
    calibration._measured.clear()
    yield
    calibration._measured.clear()
    calibration._sources.clear()


def test_the_speed_is_measured_once_per_kind_until_it_is_old():
    head, transformer = RunConfig(), with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2)
    speed = training_speed(head, "cpu", now=1e9)
    assert training_speed(with_changes(head, seed=9, encoding="learned"), "cpu", now=1e9 + 1) == speed  # cached:
    assert calibration._measured["single head", "cpu"][0] == 1e9  # not measured again
    assert speed > 0 and training_speed(transformer, "cpu") > 0
    again = training_speed(head, "cpu", now=1e9 + REMEASURE_SECONDS + 1)  # old: measured again
    assert again > 0 and calibration._measured["single head", "cpu"][0] == 1e9 + REMEASURE_SECONDS + 1


@pytest.mark.slow  # trains two runs
@pytest.mark.serial  # a ratio of two timings: not beside another worker whose load comes and goes
@pytest.mark.parametrize("changes", [dict(encoding="learned", d_model=64, steps=150),
                                     dict(task="retrieval", n_layers=2, n_heads=2, d_model=64, steps=40)],
                         ids=["single-head", "transformer"])
def test_the_estimate_is_within_3x_of_a_measured_training(tmp_path, changes):
    config = with_changes(RunConfig(), keep_training=True, seed=3, **changes)  # every step runs
    estimate = training_cost(config, speed=training_speed(config, "cpu")).seconds
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
    from lengen_core.serving.calibration import OBSERVED_STEPS
    from lengen_core.serving.jobs import TrainingPool

    config = with_changes(RunConfig(), steps=OBSERVED_STEPS + 5, keep_training=True, seed=8)
    calibration.observe(config, 2.0, "cpu")  # as if measured on a machine 200 times slower
    assert training_speed(config, "cpu") > 100
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu")
    try:
        ticket = pool.submit(config)
        deadline = time.monotonic() + 120
        while pool.status(ticket).state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.status(ticket).state == "done"
    finally:
        pool.close()
    assert training_speed(config, "cpu") < 60  # its own steps, not the slow measurement
    assert calibration.speed_source(config, "cpu") == "this server's last training"  # the form says so

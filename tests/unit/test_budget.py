"""Budgets: every training and analysis has an estimated cost checked before any work, over budget
is a message naming the knob; a training past its wall-clock limit stops, keeps its steps and frees
its slot; one training per browser; the training limit follows the CPUs this process may use."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lengen import cli
from lengen.budget import (
    MEMORY_ENV,
    SECONDS_ENV,
    TRAIN_SECONDS_ENV,
    BudgetError,
    Budgets,
    attention_map_cost,
    check,
    check_attention_map,
    check_head_analysis,
    check_training,
    training_cost,
)
from lengen.jobs import OwnerBusy, TrainingPool
from lengen.runtime import cgroup_cpu_limit
from lengen.store import RunStore
from lengen_core.config import ConfigError, RunConfig, with_changes
from tests.helpers.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
# The example: every limit of the config at once (d_model 512, 8 × 16, length 512, batch 4096, 50k steps).
EVERYTHING = with_changes(RunConfig(), task="shift", n_layers=8, n_heads=16, d_model=512, train_length=512,
                          batch_size=4096, steps=50_000)
DEFAULT_BUDGETS = Budgets(3_072 << 20, 120.0, 1_800.0)


def test_the_presets_fit_the_default_budgets():
    for changes in ({}, {"encoding": "learned"}, {"attention": "linear"}, {"task": "shift", "n_layers": 2, "n_heads": 2}):
        check(training_cost(with_changes(RunConfig(), **changes)), DEFAULT_BUDGETS)


def test_an_over_budget_training_is_refused_before_any_work(tmp_path):
    """The serving side checks a training's cost before it queues it; the message names the budget
    and what to make smaller."""
    with pytest.raises(BudgetError) as refused:
        check_training(EVERYTHING)
    message = str(refused.value)
    assert MEMORY_ENV in message and "smaller batch" in message and "GB" in message
    assert isinstance(refused.value, ConfigError)  # every caller's bad-input path shows it
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1)
    try:
        with pytest.raises(BudgetError, match=MEMORY_ENV):
            pool.submit(EVERYTHING)
        assert pool.counts() == {"running": 0, "queued": 0, "limit": 1}
    finally:
        pool.close()
    slow = with_changes(RunConfig(), task="shift", n_layers=4, n_heads=4, d_model=256, train_length=256, steps=50_000,
                        batch_size=16)  # fits in memory, takes hours
    with pytest.raises(BudgetError, match=TRAIN_SECONDS_ENV):
        check(training_cost(slow), DEFAULT_BUDGETS)


def test_the_operator_sets_the_budgets(monkeypatch):
    config = with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2, steps=1_500)
    monkeypatch.setenv(TRAIN_SECONDS_ENV, "1")
    with pytest.raises(BudgetError, match=f"limit of 1.0 s \\({TRAIN_SECONDS_ENV}\\)"):
        check(training_cost(config))
    monkeypatch.setenv(TRAIN_SECONDS_ENV, "ten")
    with pytest.raises(BudgetError, match="whole number"):
        Budgets.from_env()


def test_the_command_line_refuses_an_over_budget_training_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    out, err = io.StringIO(), io.StringIO()
    argv = ["train", "--task", "shift", "--layers", "8", "--heads", "16", "--d-model", "512", "--train-length", "512",
            "--batch-size", "4096", "--steps", "50000"]
    assert cli.main([*argv, "--budget"], stdout=out, stderr=err) == 2  # the server's limits, asked for
    assert err.getvalue().count("\n") == 1 and MEMORY_ENV in err.getvalue() and out.getvalue() == ""
    assert "without --budget" in err.getvalue()  # how to lift it
    out, err = io.StringIO(), io.StringIO()  # at a terminal, 2.4 TB is still more than any machine here holds
    assert cli.main(argv, stdout=out, stderr=err) == 2
    assert err.getvalue().count("\n") == 1 and "more than this machine's" in err.getvalue() and out.getvalue() == ""
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_an_over_budget_attention_map_is_refused_and_a_cheap_one_allowed(monkeypatch):
    config = with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2)
    monkeypatch.setenv(SECONDS_ENV, "1")
    assert attention_map_cost(config, 8_192, 1).seconds > 1
    with pytest.raises(BudgetError, match=SECONDS_ENV):
        check_attention_map(config, 8_192, layer=1)
    assert check_attention_map(config, 64, layer=1).seconds < 1
    with pytest.raises(BudgetError, match="per-head analysis"):
        monkeypatch.setenv(MEMORY_ENV, "1")
        check_head_analysis(config)


MEASURE = textwrap.dedent(
    """
    import re, sys
    from lengen.runtime import limit_heap_growth
    limit_heap_growth()
    def peak():  # this process's own high-water mark (ru_maxrss keeps the parent's across exec on Linux)
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
    import torch
    from lengen_core.config import RunConfig, with_changes
    from lengen_core.training import Training
    torch.set_num_threads(1)
    layers, heads, width, length, batch = map(int, sys.argv[1:])
    config = with_changes(RunConfig(), task="shift", n_layers=layers, n_heads=heads, d_model=width,
                          train_length=length, batch_size=batch)
    training = Training(config, "cpu")
    for _ in range(2):
        training.step()
    print(peak())
    """
)


@pytest.mark.serial  # measures a peak memory
@pytest.mark.parametrize("shape", [(2, 4, 128, 64, 64), (1, 8, 64, 256, 8)])
def test_the_memory_estimate_covers_the_measured_peak(shape):
    """Two steps in a fresh process: the estimate is above the peak resident memory, and not absurdly
    (within 3×), so the budget refuses what would not fit and lets through what would."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MEASURE, *map(str, shape)], check=False, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = int(done.stdout.split()[-1])
    layers, heads, width, length, batch = shape
    estimate = training_cost(with_changes(RunConfig(), task="shift", n_layers=layers, n_heads=heads, d_model=width,
                                          train_length=length, batch_size=batch)).memory_bytes
    assert measured <= estimate <= 3 * measured, (measured / 2**20, estimate / 2**20)


def test_a_training_past_its_wall_clock_limit_stops_keeps_its_steps_and_frees_its_slot(tmp_path):
    store = RunStore(tmp_path)
    pool = TrainingPool(store, max_concurrent=1, train_seconds=1.0)
    try:
        config = with_changes(RunConfig(), steps=50_000, keep_training=True, seed=5)
        ticket = pool.submit(config)
        wait_for(lambda: pool.status(ticket).state not in ("queued", "running"), timeout=120)
        status = pool.status(ticket)
        assert status.state == "done" and status.note is not None
        assert "wall-clock limit of 1 s" in status.note and TRAIN_SECONDS_ENV in status.note
        kept = store.load(status.stored_run_id)
        assert 0 < kept.steps < 50_000
        assert pool.counts()["running"] == 0
        other = pool.submit(with_changes(RunConfig(), steps=3, seed=6))  # the slot is free again
        while pool.status(other).state in ("queued", "running"):
            time.sleep(0.05)
        assert pool.status(other).state == "done"
    finally:
        pool.close()


def test_one_training_per_browser(tmp_path):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1)
    try:
        first = pool.submit(with_changes(RunConfig(), steps=50_000, keep_training=True, seed=7), owner="browser-a")
        with pytest.raises(OwnerBusy, match="one at a time per browser"):
            pool.submit(with_changes(RunConfig(), steps=50_000, keep_training=True, seed=8), owner="browser-a")
        other = pool.submit(with_changes(RunConfig(), steps=10, seed=9), owner="browser-b")  # another browser waits
        assert pool.status(other).state in ("queued", "running", "done")
        pool.stop(first)
        deadline = time.monotonic() + 60
        while pool.status(first).state == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        again = pool.submit(with_changes(RunConfig(), steps=10, seed=10), owner="browser-a")  # free again
        assert pool.status(again).state in ("queued", "running", "done")
    finally:
        pool.close()


def test_the_cgroup_quota_caps_the_cpus(tmp_path):
    v2 = tmp_path / "cpu.max"
    v2.write_text("150000 100000\n")
    assert cgroup_cpu_limit(v2, tmp_path / "none", tmp_path / "none") == 1.5
    v2.write_text("max 100000\n")
    assert cgroup_cpu_limit(v2, tmp_path / "none", tmp_path / "none") is None
    quota, period = tmp_path / "quota", tmp_path / "period"
    quota.write_text("50000")
    period.write_text("100000")
    assert cgroup_cpu_limit(tmp_path / "none", quota, period) == 0.5


def test_a_single_cpu_affinity_means_one_training_at_a_time():
    code = "from lengen.jobs import TrainingPool; from lengen.store import RunStore; " \
           "import tempfile; p = TrainingPool(RunStore(tempfile.mkdtemp())); print(p.max_concurrent, p.threads); p.close()"
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0 and "taskset" in done.stderr:
        pytest.skip("taskset is not available")
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.split() == ["1", "1"]


def test_the_single_head_evaluation_is_priced_too(tmp_path, monkeypatch):
    """The minimal head's evaluation to 2^20 (256 samples at every doubling) is estimated near its
    measured 13 s; under a 3 s budget the command line refuses it in one line, two short lengths pass
    (their prediction from the weights is estimated at 1.8 s)."""
    from lengen.budget import single_head_evaluation_cost
    from lengen.store import preset_store

    lengths = [16 << p for p in range(17)]
    assert 5 < single_head_evaluation_cost(RunConfig(), lengths, 256).seconds < 40
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    monkeypatch.setenv(SECONDS_ENV, "3")
    preset = next(s.run_id for s in preset_store().list_runs() if s.config == RunConfig())
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["evaluate", preset, "--lengths", ",".join(map(str, lengths)), "--json"], stdout=out, stderr=err) == 2
    assert SECONDS_ENV in err.getvalue() and err.getvalue().count("\n") == 1
    out = io.StringIO()
    assert cli.main(["evaluate", preset, "--lengths", "16,64", "--samples", "64", "--json"], stdout=out, stderr=err) == 0
    answer = json.loads(out.getvalue())  # the horizon search to 2^20 is over 3 s, but the preset ships its answer
    shipped = preset_store().first_visit(preset)["horizon"]
    assert answer["predicted_horizon"] == shipped["length"] and answer["predicted_horizon_note"] is None
    assert answer["measured_horizon"] == 64 and answer["lengths"][0]["accuracy"] == 1.0

"""Faults: a process killed while it trains or writes runs leaves a store whose every listed run loads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from lengen.store import RunStore

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import dataclasses, sys
    from lengen_core.config import RunConfig, with_changes
    from lengen.store import RunStore
    from lengen_core.training import train

    store = RunStore()
    run = train(with_changes(RunConfig(), steps=3), "cpu")
    print("trained", flush=True)
    seed = int(sys.argv[1])
    while True:  # save as fast as possible until killed
        seed += 1
        store.save(dataclasses.replace(run, config=with_changes(run.config, seed=seed)))
    """
)

TRAINER = textwrap.dedent(
    """
    from lengen_core.config import RunConfig, with_changes
    from lengen.store import RunStore
    from lengen_core.training import Training

    training = Training(with_changes(RunConfig(), steps=50_000, keep_training=True), "cpu")
    for progress in training:
        if progress.step == 5:
            print("training", flush=True)
    RunStore().save(training.finish())
    """
)


def start(script: str, home: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "LENGEN_HOME": str(home), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_after_ready(process: subprocess.Popen, ready: str, delay: float) -> None:
    assert process.stdout.readline().strip() == ready, process.stderr.read()
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


@pytest.mark.slow
def test_killed_while_writing_runs_leaves_every_listed_run_loadable(tmp_path):
    for round_, delay in enumerate((0.05, 0.3, 0.7)):
        kill_after_ready(start(WRITER, tmp_path, str(1000 * round_)), "trained", delay)
    store = RunStore(tmp_path)
    runs = store.list_runs()
    assert runs, "the writer saved nothing before it was killed"
    assert store.corrupt_runs() == {}
    for summary in runs:
        loaded = store.load(summary.run_id)
        assert loaded.run_id == summary.run_id and loaded.steps == 3
    leftovers = [p for p in store.runs_dir.iterdir() if p.name.startswith(".tmp-")]
    assert sorted(store.clean_partial(older_than_seconds=0)) == sorted(p.name for p in leftovers)
    assert len(store.list_runs()) == len(runs)  # the restart sees every finished run


@pytest.mark.slow
def test_killed_while_training_leaves_no_run_and_the_others_intact(tmp_path):
    store = RunStore(tmp_path)
    kill_after_ready(start(WRITER, tmp_path, "0"), "trained", 0.3)
    before = {s.run_id for s in store.list_runs()}
    kill_after_ready(start(TRAINER, tmp_path), "training", 0.2)
    assert {s.run_id for s in store.list_runs()} == before
    assert store.corrupt_runs() == {}


def test_a_corrupted_run_is_named_and_skipped_and_the_rest_load(tmp_path):
    from lengen_core.config import RunConfig, with_changes
    from lengen_core.training import train

    store = RunStore(tmp_path)
    good, bad = (train(with_changes(RunConfig(), steps=2, seed=seed), "cpu") for seed in (1, 2))
    store.save(good)
    store.save(bad)
    weights = store.run_dir(bad.run_id) / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert [s.run_id for s in store.list_runs()] == [good.run_id]
    assert "weights.safetensors" in store.corrupt_runs()[bad.run_id]
    assert torch.equal(store.load(good.run_id).model.embed, good.model.embed)

"""Train longer: a stored run trained further, as a new run whose config names the run it continues."""

from __future__ import annotations

import io
import json
import math
import statistics

import pytest

from lengen import cli
from lengen.jobs import TrainingPool
from lengen.lineage import continuation, parent_run
from lengen.store import RunStore, StoreError
from lengen_core.config import ConfigError, RunConfig, with_changes
from lengen_core.training import train
from tests.helpers.waiting import wait_for

PARENT = with_changes(RunConfig(), steps=300, keep_training=True)  # ~3 s; 300 losses to read the noise from


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("lineage")
    store = RunStore(root)
    store.save(train(PARENT, "cpu"))
    return root


def cli_json(home, monkeypatch, *argv: str) -> dict:
    monkeypatch.setenv("LENGEN_HOME", str(home))
    stdout, stderr = io.StringIO(), io.StringIO()
    assert cli.main([*argv, "--json"], stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    return json.loads(stdout.getvalue())


def test_continue_starts_from_the_stored_weights_and_records_its_parent(home, monkeypatch):
    parent = RunStore(home).load(PARENT.run_id())
    result = cli_json(home, monkeypatch, "continue", PARENT.run_id(), "--steps", "40", "--device", "cpu")
    assert result["run_id"] != PARENT.run_id() and not result["reused"]
    train_section = result["config"]["train"]
    assert train_section["continues"] == PARENT.run_id() and train_section["keep_training"]
    assert result["config"]["task"] == PARENT.to_dict()["task"] and result["config"]["model"] == PARENT.to_dict()["model"]
    child = RunStore(home).load(result["run_id"])
    tail = parent.history["loss"][-100:]
    first = child.history["loss"][0]
    # the parent's last loss, within the batch noise of its last 100 steps; a fresh start is at ln V
    assert abs(first - statistics.mean(tail)) <= 3 * statistics.stdev(tail) + 1e-3, (first, statistics.mean(tail))
    assert first < 0.1 * math.log(PARENT.task.vocab_size)
    again = cli_json(home, monkeypatch, "continue", PARENT.run_id(), "--steps", "40", "--device", "cpu")
    assert again["reused"] and again["run_id"] == result["run_id"]


def test_a_continuation_keeps_the_task_and_model(home):
    other = with_changes(continuation(PARENT, 10), offset=5)
    with pytest.raises(ConfigError, match=r"keeps its task; this one changes offset 3 → 5"):
        parent_run(other, RunStore(home))
    with pytest.raises(StoreError, match="not stored here"):
        parent_run(with_changes(PARENT, continues="rope-softmax-retrieval-s0-000000000000"), RunStore(home))


def test_the_pool_refuses_a_continuation_of_a_missing_run_before_it_waits(tmp_path):
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu")
    try:
        with pytest.raises(StoreError, match="nothing to continue"):
            pool.submit(continuation(PARENT, 10))
    finally:
        pool.close()


def test_the_pool_trains_a_continuation_from_the_stored_weights(home):
    pool = TrainingPool(RunStore(home), max_concurrent=1, device="cpu")
    try:
        config = continuation(PARENT, 7)
        ticket = pool.submit(config)
        wait_for(lambda: pool.status(ticket).state in ("done", "failed"), timeout=60)
        assert pool.status(ticket).state == "done", pool.status(ticket)
    finally:
        pool.close()
    child = RunStore(home).load(config.run_id())
    assert child.config.train.continues == PARENT.run_id()
    assert child.history["loss"][0] < 0.1 * math.log(PARENT.task.vocab_size)

"""The Ray pool's parts that need no cluster (lengen.ray_pool): the in-actor pipe carries a
training's whole protocol (serve_training: paused first, exactly n steps, stop, save) as the child's pipe
does, and the GPU share an operator sets is checked with a message. The cluster itself:
tests/e2e/test_pool_ray.py."""

from __future__ import annotations

import threading
import time

import pytest

from lengen.ray_pool import GPU_SHARE_ENV, ClusterUnreachable, _Pipe, gpu_share, plan, trainer_options
from lengen.store import RunStore
from lengen.training_process import serve_training
from lengen_core.config import RunConfig, with_changes


def messages_until(pipe: _Pipe, wanted, commands=(), timeout: float = 60.0) -> list:
    """Exchange `commands`, then keep exchanging until a message satisfies `wanted`; every message seen."""
    seen, outgoing, deadline = [], list(commands), time.monotonic() + timeout
    while not any(wanted(message) for message in seen):
        assert time.monotonic() < deadline, seen[-3:]
        seen += pipe.exchange(outgoing, 0.05)
        outgoing = []
    return seen


def test_the_pipe_carries_a_paused_training_step_by_step_to_its_stored_run(tmp_path):
    store, pipe = RunStore(tmp_path), _Pipe()
    config = with_changes(RunConfig(), steps=50, d_model=8, train_length=8, batch_size=4)
    trainer = threading.Thread(target=serve_training, args=(pipe, store, "cpu", (config, [("pause", 0)])))
    trainer.start()
    try:
        assert not [kind for kind, _ in pipe.exchange([], 0.5) if kind == "progress"]  # paused before step 1
        steps = [payload.step for kind, payload in messages_until(pipe, lambda m: m[0] == "progress",
                                                                    [("advance", 2)]) if kind == "progress"]
        time.sleep(0.3)
        steps += [payload.step for kind, payload in pipe.exchange([], 0.1) if kind == "progress"]
        assert steps == [1, 2]  # exactly two, then it holds
        seen = messages_until(pipe, lambda m: m[0] == "stopped", [("stop", None)])
        done = messages_until(pipe, lambda m: m[0] == "done", [("save", None)])
    finally:
        pipe.exchange([("stop", None), ("discard", None)], 0.0)
        trainer.join(30)
    assert not any(kind == "progress" for kind, _ in seen)  # a stop while paused takes no further step
    run_id = dict(done)["done"]
    assert run_id == with_changes(config, steps=2).run_id() and store.exists(run_id)


@pytest.mark.parametrize("text, share", [("", 0.25), ("0.5", 0.5), ("1", 1.0), ("0", 0.0)])
def test_the_gpu_share_is_read_from_its_variable(monkeypatch, text, share):
    monkeypatch.setenv(GPU_SHARE_ENV, text)
    assert gpu_share() == share


@pytest.mark.parametrize("text", ["2", "-0.5", "half", "nan"])
def test_a_gpu_share_outside_its_bounds_says_what_is_allowed(monkeypatch, text):
    monkeypatch.setenv(GPU_SHARE_ENV, text)
    with pytest.raises(ClusterUnreachable, match="a number from 0 "):
        gpu_share()


def test_a_cluster_with_gpus_gives_each_training_a_share_of_one(monkeypatch):
    monkeypatch.delenv(GPU_SHARE_ENV, raising=False)
    assert plan({"CPU": 20.0, "GPU": 1.0}) == (4, 0.25)  # four to the GPU, though there are 20 CPUs
    assert plan({"CPU": 2.0, "GPU": 2.0}) == (2, 0.25)  # and never more than the CPUs
    assert plan({"CPU": 16.0}) == (16, 0.0)  # no GPU: one per CPU
    assert plan({"CPU": 16.0, "GPU": 1.0}, max_concurrent=3) == (3, 0.25)  # LENGEN_MAX_TRAININGS
    device, options = trainer_options(0.25)
    assert device == "cuda" and options["num_gpus"] == 0.25 and options["num_cpus"] == 1
    assert trainer_options(0.0)[0] == "cpu" and trainer_options(0.0)[1]["num_gpus"] == 0
    monkeypatch.setenv(GPU_SHARE_ENV, "0")  # the operator keeps trainings on CPUs beside a GPU
    assert plan({"CPU": 16.0, "GPU": 1.0}) == (16, 0.0)

"""The app's training pool on a real local Ray cluster (lengen.ray_pool, issue 29): a run
trained through it is the local pool's run; pause, step and stop drive it; a second replica (another
process) shares its queue, its one-training-per-browser rule and its merged requests, and its trainings
outlive it; a killed Ray worker fails its training with a message and stores nothing.

One session Ray head (tests/e2e/conftest.py `ray_cluster`), one pool actor for the module. Skipped, with
the reason, only where Ray is not installed (requirements-ray.txt)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

from lengen.jobs import OwnerBusy, TrainingPool
from lengen.stepping import Pace
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes

# Ray reads its token from the environment once, when it is imported: not here, but in the process that connects
if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed here (pip install -r requirements-ray.txt)", allow_module_level=True)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

ROOT = Path(__file__).resolve().parents[2]
SMALL = with_changes(RunConfig(), steps=30, d_model=16)


def config(seed: int, **changes) -> RunConfig:
    return with_changes(SMALL, seed=seed, **changes)


@pytest.fixture(scope="module")
def cluster_pool(ray_cluster, tmp_path_factory):
    """(pool, store, address, client env, pool name): this process as one replica of the cluster's pool."""
    from lengen.ray_pool import RayTrainingPool

    address, env = ray_cluster
    store = RunStore(tmp_path_factory.mktemp("ray-pool-store"))
    name = f"test-pool-{uuid.uuid4().hex[:8]}"
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "HOME"):
            patch.setenv(key, env[key])
        torch.set_num_threads(1)  # as each Trainer actor trains: the local pool's run must be the same bytes
        pool = RayTrainingPool(address, store, max_concurrent=2, name=name)
        try:
            yield pool, store, address, env, name
        finally:
            pool.shut_down()
            import ray

            ray.shutdown()
            torch.set_num_threads(threads)


def wait_for(pool, ticket, predicate, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while not predicate(status := pool.status(ticket)):
        assert time.monotonic() < deadline, f"timed out at {status}"
        time.sleep(0.05)
    return status


def ended(status) -> bool:
    return status.state not in ("queued", "running")


def test_the_estimates_speed_is_the_one_a_trainer_timed(cluster_pool, monkeypatch):
    """The Train form's estimate reads the cluster's speed (issue 28): the first worker's Trainer times the
    reference runs after its warm-up and the pool host keeps them; this replica times nothing."""
    from lengen import calibration

    pool = cluster_pool[0]
    timed_here = []  # this process (the replica) must time nothing: any step it timed would land here
    monkeypatch.setattr(calibration, "measured_step_seconds", lambda *args, **kw: timed_here.append(args) or 1.0)
    transformer = config(1, task="shift", n_layers=1, n_heads=2)  # no test here trains one: still the timed figure
    deadline = time.monotonic() + 300
    while (speed := pool.training_speed(transformer)) is None:
        assert time.monotonic() < deadline, "no Trainer timed the reference runs"
        time.sleep(0.2)
    assert speed.source == calibration.TIMED and speed.factor > 0 and not speed.old
    assert timed_here == []


def test_a_run_trained_on_the_cluster_is_the_local_pools_run(cluster_pool, tmp_path):
    pool, store, *_ = cluster_pool
    asked = config(1)
    on_ray = wait_for(pool, pool.submit(asked, owner="same-run"), ended)
    assert on_ray.state == "done" and on_ray.error is None and on_ray.stored_run_id == asked.run_id()
    assert on_ray.history["step"] == list(range(1, on_ray.progress.step + 1))  # every step reached the replica
    local_pool = TrainingPool(RunStore(tmp_path / "local"), max_concurrent=1, device="cpu")
    try:
        here = wait_for(local_pool, local_pool.submit(asked), ended)
    finally:
        local_pool.close()
    assert here.stored_run_id == on_ray.stored_run_id
    assert here.history["loss"] == on_ray.history["loss"]
    remote, local = store.load(asked.run_id()), local_pool.store.load(asked.run_id())
    for (key, a), b in zip(remote.model.state_dict().items(), local.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), key


def test_pause_step_and_stop_drive_a_cluster_training(cluster_pool):
    pool, store, *_ = cluster_pool
    asked = config(2, steps=200)
    ticket = pool.submit(asked, owner="stepper", pace=Pace(start_paused=True))
    status = wait_for(pool, ticket, lambda s: s.state == "running" and s.paused)
    assert status.progress is None  # paused before its first step
    pool.advance(ticket, 3)
    status = wait_for(pool, ticket, lambda s: s.progress is not None and s.progress.step == 3 and s.paused)
    time.sleep(0.5)
    assert pool.status(ticket).progress.step == 3  # exactly three, then it holds
    pool.set_pace(ticket, 20.0)
    pool.resume(ticket)
    wait_for(pool, ticket, lambda s: s.progress.step >= 6)
    pool.stop(ticket)
    status = wait_for(pool, ticket, ended)
    kept = status.progress.step
    assert status.state == "done" and status.stopped and kept < 200
    assert status.stored_run_id == with_changes(asked, steps=kept).run_id() and store.exists(status.stored_run_id)


REPLICA = """
import json, sys, time
from pathlib import Path
from lengen_core.config import RunConfig, with_changes
from lengen.ray_pool import RayTrainingPool
from lengen.stepping import Pace
from lengen.store import RunStore
address, root, name, seed = sys.argv[1:]
pool = RayTrainingPool(address, RunStore(Path(root)), name=name)
config = with_changes(RunConfig(), steps=60, d_model=16, seed=int(seed))
ticket = pool.submit(config, owner="moved-browser", pace=Pace(steps_per_second=15))
print(json.dumps({"ticket": ticket, "run_id": config.run_id()}), flush=True)
time.sleep(600)
"""


def test_another_replica_shares_the_queue_and_its_trainings_outlive_it(cluster_pool):
    pool, store, address, env, name = cluster_pool
    replica = subprocess.Popen([sys.executable, "-c", REPLICA, address, str(store.root), name, "3"], cwd=ROOT,
                               env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        asked = json.loads(replica.stdout.readline())
    finally:
        replica.send_signal(signal.SIGKILL)  # the replica dies mid-training
        replica.wait(30)
    ticket = asked["ticket"]
    # the browser, reloaded onto this replica, finds its training, and may start no other one here either
    assert pool.owned("moved-browser") == ticket
    with pytest.raises(OwnerBusy, match="one at a time per browser"):
        pool.submit(config(4), owner="moved-browser")
    # another browser asking for the same run joins that training instead of starting a second one
    joined = pool.submit(config(3, steps=60), owner="classmate")
    assert pool.status(joined).holders == 2 and pool.status(joined).run_id == asked["run_id"]
    status = wait_for(pool, ticket, ended)
    assert status.state == "done" and status.stored_run_id == asked["run_id"] and store.exists(asked["run_id"])
    assert [run.run_id for run in store.list_runs()].count(asked["run_id"]) == 1


def test_a_killed_worker_fails_its_training_clearly_and_stores_nothing(cluster_pool):
    pool, store, *_ = cluster_pool
    asked = config(5, steps=200)
    ticket = pool.submit(asked, owner="unlucky", pace=Pace(start_paused=True))
    wait_for(pool, ticket, lambda s: s.state == "running" and s.paused)
    for pid in pool.training_pids():  # this machine is the cluster: its Trainer actors' worker processes
        os.kill(pid, signal.SIGKILL)
    status = wait_for(pool, ticket, ended, timeout=60)
    assert status.state == "failed" and "Ray worker was lost" in status.error and "nothing was saved" in status.error
    assert not store.exists(asked.run_id()) and asked.run_id() not in {run.run_id for run in store.list_runs()}
    again = wait_for(pool, pool.submit(config(5), owner="unlucky"), ended)  # the next training gets a new actor
    assert again.state == "done", again.error

"""Several replicas, one store: processes (not threads) sharing one `LENGEN_HOME` race on the same and on
different runs, keep one quota, and a writer on "another host" (its own pid namespace, as in another
container) killed mid-write is never taken for a dead one while it lives, nor leaves a half run listed.

The three races are slow (each writer starts torch and trains); their quick representatives are the last
two tests: the cleaner's rule for another host's temp directories, and a run vanishing during a listing."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import lengen.store_writers as writers
from lengen import run_files
from lengen.store import TEMP_PREFIX, RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train

ROOT = Path(__file__).resolve().parents[2]
DEAD_PID = 4_999_999  # above Linux's largest pid (2**22): what another container's writer looks like from here

# A replica's writer: trains once, waits for the starting gun, then saves the given seeds of that run.
# argv: home, go-file, host it plays, seeds ("1,1,12"), quota in bytes (0: the default), pid it shows.
RACER = textwrap.dedent(
    """
    import dataclasses, sys, time
    from pathlib import Path
    import lengen.store_writers as writers
    from lengen.store import RunStore
    from lengen_core.config import RunConfig, with_changes
    from lengen_core.training import train

    home, go, host, seeds, quota, pid = sys.argv[1:7]
    writers.host = lambda: host
    if pid != "own":
        writers.temp_prefix = lambda: f"{writers.TEMP_PREFIX}{pid}@{host}@"
    store = RunStore(Path(home), quota=int(quota) or None)
    run = train(with_changes(RunConfig(), steps=3), "cpu")
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.002)
    for seed in (int(s) for s in seeds.split(",")) if seeds != "forever" else iter(range(10, 10**9)):
        store.save(dataclasses.replace(run, config=with_changes(run.config, seed=seed)))
    print("done", flush=True)
    """
)


def start(home: Path, go: Path, host: str, seeds: str, quota: int = 0, pid: str = "own") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", RACER, str(home), str(go), host, seeds, str(quota), pid],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def race(home: Path, plans: list[tuple[str, str]], quota: int = 0, watch=None) -> None:
    """Start one writer per (host, seeds), fire them together once all have trained, call `watch()` over and
    over while they write, and check each finished."""
    go = home.parent / f"go-{home.name}"
    writers = [start(home, go, host, seeds, quota) for host, seeds in plans]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
    go.touch()
    while watch is not None and any(writer.poll() is None for writer in writers):
        watch()
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0 and out.strip() == "done", err[-3000:]


def temp_dirs(store: RunStore) -> list[str]:
    return sorted(p.name for p in store.runs_dir.iterdir() if p.name.startswith(TEMP_PREFIX))


@pytest.mark.slow
def test_replicas_racing_on_the_same_and_different_runs_store_each_once(tmp_path):
    home = tmp_path / "home"
    # all three save seed 1 at the gun (twice each), then runs of their own
    race(home, [(f"replica-{n}", ",".join(["1", "1", *(str(100 + 10 * n + k) for k in range(4))])) for n in range(3)])
    store = RunStore(home)
    runs = store.list_runs()
    assert sorted(s.config.train.seed for s in runs) == sorted([1, *(100 + 10 * n + k for n in range(3) for k in range(4))])
    assert store.corrupt_runs() == {}
    assert temp_dirs(store) == []  # every losing copy of seed 1 was dropped, nothing half written is left
    for summary in runs:
        assert store.load(summary.run_id).steps == 3


@pytest.mark.slow
def test_the_quota_holds_across_replicas_writing_at_once(tmp_path):
    one = RunStore(tmp_path / "scratch", quota=1 << 30)
    one.save(train(with_changes(RunConfig(), steps=3, seed=99), "cpu"))
    size = max(one.size().values())
    quota = int(3.5 * size)  # room for three runs, not four
    home = tmp_path / "home"
    store = RunStore(home, quota=quota)
    seen = []

    def within_quota_under_the_lock() -> None:  # what any replica sees when it takes the store's lock
        if store.runs_dir.is_dir():
            with store._lock():
                seen.append(sum(store.size().values()))

    race(home, [(f"replica-{n}", ",".join(str(100 * n + k) for k in range(5))) for n in range(3)], quota=quota,
         watch=within_quota_under_the_lock)
    assert len(seen) > 10 and max(seen) <= quota, f"a replica saw {max(seen)} bytes stored over a quota of {quota}"
    sizes = store.size()
    assert sum(sizes.values()) <= quota, f"{sum(sizes.values())} bytes stored over a quota of {quota}"
    assert len(sizes) == 3, f"15 saves into room for 3 runs left {len(sizes)}: the count was not one total"
    assert store.corrupt_runs() == {} and temp_dirs(store) == []


@pytest.mark.slow
def test_another_hosts_writer_is_left_alone_while_it_writes_and_its_kill_leaves_no_half_run(tmp_path):
    home, go = tmp_path / "home", tmp_path / "go"
    writer = start(home, go, "replica-b", "forever", pid=str(DEAD_PID))
    assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
    go.touch()
    store = RunStore(home)  # this host's replica: starts its pool (clean_partial) and lists, over and over
    until = time.monotonic() + 2.0
    cleaned, listed = [], 0
    while time.monotonic() < until:
        cleaned += store.clean_partial()
        listed = max(listed, len(store.list_runs()))
        assert store.corrupt_runs() == {}
        assert writer.poll() is None, f"the other replica's save failed: {writer.stderr.read()[-3000:]}"
    assert cleaned == [], "a live write of another host was removed as if its writer were dead"
    assert listed > 0, "the other replica saved nothing in 2 s"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    runs = store.list_runs()
    assert store.corrupt_runs() == {}
    for summary in runs:
        assert store.load(summary.run_id).steps == 3
    leftovers = temp_dirs(store)
    assert all("@replica-b@" in name for name in leftovers)
    assert store.clean_partial() == []  # young, and its host's processes cannot be seen from here
    assert sorted(store.clean_partial(older_than_seconds=0)) == leftovers
    assert len(store.list_runs()) == len(runs)


def test_a_cleaner_removes_only_its_own_hosts_dead_writes_at_once(tmp_path):
    store = RunStore(tmp_path)
    store.runs_dir.mkdir(parents=True)
    here = writers.host()
    mine_dead = f".tmp-{DEAD_PID}@{here}@abc"
    mine_alive = f".tmp-{os.getpid()}@{here}@def"
    foreign = f".tmp-{DEAD_PID}@other-host@ghi"
    for name in (mine_dead, mine_alive, foreign):
        (store.runs_dir / name).mkdir()
    assert store.clean_partial() == [mine_dead]
    assert store.clean_partial(older_than_seconds=0) == [foreign]
    assert temp_dirs(store) == [mine_alive]
    assert writers.temp_prefix().startswith(f".tmp-{os.getpid()}@{here}@")


def test_a_run_removed_by_another_writer_during_a_listing_is_gone_not_damaged(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    run = train(with_changes(RunConfig(), steps=2), "cpu")
    store.save(run)
    store.save(dataclasses.replace(run, config=with_changes(run.config, seed=5)))
    victim = store.run_dir(run.run_id)
    check = run_files.check_weights

    def removed_meanwhile(path: Path) -> None:
        if path.parent == victim:
            shutil.rmtree(victim)  # another replica evicts it between reading its record and its weights
        check(path)

    monkeypatch.setattr(run_files, "check_weights", removed_meanwhile)
    summaries, corrupt = store._scan()
    assert [s.config.train.seed for s in summaries] == [5]
    assert corrupt == {}

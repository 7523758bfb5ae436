"""Ctrl-C on `python -m lengen sweep`: the command stops at once with a message and a non-zero
status, keeps the cells finished, leaves no worker behind, and the same command run again trains only
the missing cells and gives the table an uninterrupted sweep gives."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from lengen.sweep import SweepGrid, sweep_dir

ROOT = Path(__file__).resolve().parents[2]
# Three tiny cells, one worker, each training all its 400 steps (no early stop: in CI two cells that
# stopped early once finished before the Ctrl-C landed), so Ctrl-C lands while one runs.
OPTIONS = ["--encodings", "rope", "--offsets", "1,2,3", "--seeds", "0", "--lengths", "16,32", "--samples", "64",
           "--set", "steps=400", "--set", "d_model=32", "--set", "qk_init=1.0", "--set", "keep_training=true",
           "--workers", "1"]
GRID = SweepGrid(offsets=(1, 2, 3), seeds=(0,), lengths=(16, 32), samples=64,
                 base=(("steps", 400), ("d_model", 32), ("qk_init", 1.0), ("keep_training", True)))
FIGURES = ["offset", "run_id", "length", "accuracy", "target_mass", "m_out", "argmax_offset", "predicted_horizon"]


def sweep(home: Path, *extra: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lengen", "sweep", *OPTIONS, *extra], cwd=ROOT,
                            env={**os.environ, "LENGEN_HOME": str(home)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def group_alive(group: int, wait: float = 5.0) -> bool:
    """Whether any process of `group` is still there after `wait` seconds (multiprocessing's resource
    tracker ends a moment after the command, once its pipe closes)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)


@pytest.mark.slow  # three sweeps in subprocesses; tests/unit/test_sweep.py cancels and resumes one in-process quickly
@pytest.mark.serial  # times the stop after Ctrl-C
def test_ctrl_c_stops_the_sweep_keeps_its_cells_and_the_same_command_resumes(tmp_path):
    cells = sweep_dir(tmp_path, GRID.sweep_id()) / "cells"
    # Its own process group, as a terminal's foreground job, where Ctrl-C is not ignored: a shell without job
    # control starts its background jobs (say `bash scripts/test.sh --all &`) with SIGINT ignored, an ignored
    # signal stays ignored across exec, and Python then installs no KeyboardInterrupt handler at all.
    process = sweep(tmp_path, start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while not list(cells.glob("*.json")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no cell finished in 240 s"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole group: the command and its workers
    interrupted = time.monotonic()
    out, err = process.communicate(timeout=60)
    took = time.monotonic() - interrupted
    assert took < 15, f"{took:.1f} s to stop after Ctrl-C"
    assert process.returncode == 130 and "Traceback" not in err, err  # the shell's status for Ctrl-C
    message = re.search(r"interrupted \(Ctrl-C\): (\d) of 3 cells are done and kept in .+; run the same command "
                        r"again to run the other (\d)", err)
    assert message, err
    done = int(message.group(1))
    assert 1 <= done < 3 and int(message.group(2)) == 3 - done
    assert len(list(cells.glob("*.json"))) == done  # the finished cells kept, nothing half-written
    assert not group_alive(process.pid), subprocess.run(["ps", "-o", "pid,args", "-g", str(process.pid)],
                                                          check=False, capture_output=True, text=True).stdout

    resumed = sweep(tmp_path, "--json")
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    answer = json.loads(out)
    assert answer["ran"] == 3 - done and answer["trained"] <= 3 - done  # only the missing cells
    assert all("error" not in cell for cell in answer["cells"])
    table = pd.read_parquet(answer["parquet"])

    shutil.rmtree(sweep_dir(tmp_path, GRID.sweep_id()))  # the same sweep uninterrupted, its runs stored
    whole = sweep(tmp_path, "--json")
    out, err = whole.communicate(timeout=600)
    assert whole.returncode == 0, err
    assert json.loads(out)["ran"] == 3 and json.loads(out)["trained"] == 0
    pd.testing.assert_frame_equal(table[FIGURES], pd.read_parquet(json.loads(out)["parquet"])[FIGURES])

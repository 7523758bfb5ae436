"""Smoke test of the benchmark (bench/): its lengen parts run at tiny sizes and write the JSON it promises.

No timing is asserted (timings belong to `python -m bench`, never to tests): only that every part
ran, at every width asked, every figure is a positive number, the accuracies are lengen's own for the
benchmark's config at the first width (the command's the same as the core's) and the report was
written. The peer (TransformerLens, in bench/.venv-peer) is never needed: it is left out with
--no-peer, so the test runs the same with or without that environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import QUICK, REPORTED
from bench.common import TARGETS
from bench.lengen_side import bench_config
from lengen_core.analysis.evaluate import evaluate
from lengen_core.training import train

ROOT = Path(__file__).resolve().parents[2]
LENGEN_PARTS = ["training", "evaluation", "long", "prediction", "scaling", "profile"]

# serial: the benchmark times and measures what it runs. Quick representative: tests/unit/test_bench_targets.py
# (the judgement of every figure against its target, from made-up results).
pytestmark = [pytest.mark.slow, pytest.mark.serial]


def run_bench(out: Path, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "bench", "--quick", "--threads", "1", "--out", str(out), *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "## Every figure beside its target and the peer" in done.stdout
    return json.loads((out / "latest.json").read_text())


def positive(value) -> bool:
    return isinstance(value, (int, float)) and value > 0


def test_quick_lengen_parts_write_every_figure(tmp_path: Path) -> None:
    results = run_bench(tmp_path, "--no-peer", "--widths", "32", "64", "--parts", *LENGEN_PARTS)

    assert {"meta", "training", "evaluation", "evaluation_issue", "evaluation_long", "prediction", "scaling",
            "profiles", "targets"} <= set(results)
    meta = results["meta"]
    assert positive(meta["machine"]["torch_threads"]) and meta["versions"]["torch"]
    assert set(results["training"]["rope"]) == {"32", "64"}  # every width asked, each on its own
    for width, part in results["training"]["rope"].items():
        assert part["d_model"] == int(width) and "peer skipped" in part["peer_error"]
        assert positive(part["lengen"]["steps_per_second"])
        assert all(positive(run["seconds"]) for run in part["lengen"]["runs"])
    evaluation = results["evaluation"]["rope"]
    assert evaluation["d_model"] == 32  # the first width is the one evaluated
    assert [row["length"] for row in evaluation["lengen"]] == [16, 64]
    assert all(positive(row["seconds"]) for row in evaluation["lengen"])
    # the figures lengen's evaluation gives the seed-0 run of the benchmark's config (one thread, as here)
    config = bench_config("rope", QUICK.steps, seed=0, d_model=32)
    run = train(config, "cpu")
    reports = evaluate(run.model, config, [16, 64], samples=QUICK.samples)
    assert [(row["accuracy"], row["target_mass"]) for row in evaluation["lengen"]] == [
        (report.accuracy, report.target_mass) for report in reports]
    assert "peer skipped" in evaluation["peer_error"]
    # the issue's evaluation: a run made by the command line, evaluated by the core and by the command alike
    issue = results["evaluation_issue"]
    assert issue["config"]["model"]["d_model"] == 32 and issue["length"] == QUICK.issue_length
    core, command = issue["core"], issue["command"]
    assert positive(core["seconds"]) and positive(command["seconds"]) and positive(command["peak_rss_bytes"])
    assert (core["accuracy"], core["target_mass"]) == (command["accuracy"], command["target_mass"])
    assert positive(issue["command_startup"]["seconds"])
    for row in results["evaluation_long"]:
        assert positive(row["seconds"]) and positive(row["peak_rss_bytes"])
        assert row["peak_rss_bytes"] >= row["baseline_rss_bytes"]
    assert positive(results["prediction"]["seconds"]) and len(results["prediction"]["lengths"]) == 20
    scaling = results["scaling"]
    assert all(positive(row["seconds"]) for row in scaling["evaluation"])
    assert all(positive(row["steps_per_second"]) for rows in scaling["training"].values() for row in rows)
    assert all(profile["top_by_own_time"] for profile in results["profiles"].values())
    assert (tmp_path / "profile_evaluation.prof").is_file() and (tmp_path / "latest.md").is_file()
    # --quick stops at 2^12 keys and --no-peer has nothing to compare with: no target can be met, and every
    # row says which target it is
    targets = results["targets"]
    assert {row["target"] for row in targets} <= {target.text for target in TARGETS.values()}
    assert all(row["status"] in ("not measured", "missed", REPORTED) for row in targets)
    # neither width is today's default: the training rows are reported beside the targets, not judged
    assert all(row["status"] in ("not measured", REPORTED) for row in targets if row["figure"].startswith("training"))
    assert sum(row["figure"].startswith("training steps/s") for row in targets) == 2  # one per width
    issue_figures = {TARGETS[key].figure for key in TARGETS if key.startswith(("core_2^20", "command_2^20"))}
    issue_rows = [row for row in targets if row["figure"] in issue_figures]
    assert len(issue_rows) == 5
    assert all(row["status"] == "not measured" and "not 2^20 × 256" in row["note"] for row in issue_rows)


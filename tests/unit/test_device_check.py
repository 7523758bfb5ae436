"""The device check's dry run (scripts/device_check.sh with DEVICE=cpu): the CPU stands in for the
device at smaller sizes, and every line the check promises is printed, each one ok."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.device_check import LABELS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_dry_run_prints_every_line_and_passes() -> None:
    env = {**os.environ, "DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(ROOT / "scripts" / "device_check.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert [line[5:].split(":")[0] for line in lines] == list(LABELS), lines
    assert all(line.startswith("ok   ") for line in lines), lines
    environment, training, evaluation, load, gpu = lines
    assert "torch " in environment and "dry run: the CPU stands in for the device, at smaller sizes" in environment
    assert "steps/s" in training and "bit-identical: yes" in training
    assert "8,192 tokens × 32" in evaluation and "(equal)" in evaluation
    assert "CUDA is not available, on cpu" in load and "weights identical: yes" in load
    assert "pytest -m gpu" in gpu and "skipped" in gpu

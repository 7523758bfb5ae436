"""The device path end to end (issue 15): a run trained on a GPU loads where there is none, a 2^20
evaluation on the GPU gives the CPU's accuracy, every encoding and the transformer train and are
analysed on the GPU, and a training child process trains there.

Each test takes the device as a parameter: `cuda` is `gpu`-marked (tests/conftest.py skips it
without CUDA, so `pytest -m gpu` selects exactly these), and `cpu` stands in for it at smaller
sizes, so every body runs on every machine. On the CPU these show that the code runs and that a
run moves between processes; the device figures come from the CUDA runs (scripts/device_check.sh).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench.device_check import weights_digest
from lengen.jobs import TrainingPool
from lengen.store import RunStore, preset_store
from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.equivariance import check_equivariance
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.heads import analyse_heads
from lengen_core.analysis.heatmap import attention_heatmap, head_map
from lengen_core.analysis.sequence import evaluate_sequence
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training, resolve_device, train

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
TINY = {"d_model": 16, "train_length": 8, "offset": 2, "batch_size": 16, "keep_training": True}


def rope_preset() -> str:
    """The shipped RoPE softmax head trained on retrieval (assets/presets): a head that learned."""
    return next(s.run_id for s in preset_store().list_runs() if s.config.single_head and s.config.task.task == "retrieval"
                and (s.config.model.encoding, s.config.model.attention) == ("rope", "softmax"))


def on_device(model: torch.nn.Module, device: str) -> bool:
    return all(p.device.type == resolve_device(device).type for p in model.parameters())


LOAD_WITHOUT_CUDA = """
import json, sys, torch
from lengen_core.analysis.evaluate import evaluate
from lengen.store import RunStore
from bench.device_check import weights_digest
run = RunStore(sys.argv[1]).load(sys.argv[2], "auto")
report = evaluate(run.model, run.config, [int(sys.argv[3])], samples=64)[0]
print(json.dumps({"cuda": torch.cuda.is_available(), "device": run.device, "trained_on": run.training_device,
                  "digest": weights_digest(run.model), "accuracy": report.accuracy}))
"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_run_trained_on_the_device_loads_in_a_process_without_cuda(tmp_path: Path, device: str) -> None:
    run = train(with_changes(RunConfig(), steps=20, **TINY), device)
    RunStore(tmp_path).save(run)
    expected = evaluate(run.model, run.config, [32], samples=64)[0].accuracy
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_CUDA, str(tmp_path), run.run_id, "32"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["cuda"] is False and loaded["device"] == "cpu"
    assert loaded["trained_on"] == str(resolve_device(device))  # where it was trained, not where it is now
    assert loaded["digest"] == weights_digest(run.model)  # the same weights, moved off the device
    assert abs(loaded["accuracy"] - expected) <= 1 / 64  # one answer at most: the device's float rounding


@pytest.mark.parametrize("device, length, samples", [("cpu", 1 << 12, 32),
                                                     pytest.param("cuda", 1 << 20, 256, marks=pytest.mark.gpu)])
def test_an_evaluation_on_the_device_gives_the_cpus_accuracy(device: str, length: int, samples: int) -> None:
    """2^20 × 256 on CUDA (4,096 × 32 for the CPU stand-in): the same sequences on both, so the same
    accuracy, to one answer in a near-tie rounded differently, and target mass to float32 rounding."""
    on_cpu = preset_store().load(rope_preset(), "cpu")
    on_dev = preset_store().load(rope_preset(), device)
    assert on_device(on_dev.model, device)
    cpu_report = evaluate(on_cpu.model, on_cpu.config, [length], samples=samples)[0]
    dev_report = evaluate(on_dev.model, on_dev.config, [length], samples=samples)[0]
    assert abs(dev_report.accuracy - cpu_report.accuracy) <= 1 / samples
    assert dev_report.target_mass == pytest.approx(cpu_report.target_mass, rel=1e-3, abs=1e-6)


SINGLE_HEADS = [(encoding, attention) for encoding in ("rope", "learned", "sinusoidal", "alibi", "nope")
                for attention in ("softmax", "linear")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("encoding, attention", SINGLE_HEADS)
def test_every_single_head_trains_and_is_analysed_on_the_device(device: str, encoding: str, attention: str) -> None:
    """Training, the verdict, evaluation, the prediction, the carrier, the heatmaps and the
    equivariance check all run with the model on the device, and agree with the same weights on the CPU."""
    config = with_changes(RunConfig(), encoding=encoding, attention=attention, steps=3, max_positions=64, **TINY)
    run = train(config, device)
    assert on_device(run.model, device) and math.isfinite(run.loss) and run.verdict is not None
    cpu_model = train(config, "cpu").model if device != "cpu" else run.model
    lengths = [8, 32]
    on_dev = evaluate(run.model, config, lengths, samples=32)
    on_cpu = evaluate(cpu_model, config, lengths, samples=32)
    for a, b in zip(on_dev, on_cpu, strict=True):
        assert a.target_mass == pytest.approx(b.target_mass, rel=1e-2, abs=1e-4)  # 3 steps apart: rounding only
    assert [p.length for p in predict(run.model, config, lengths)] == lengths
    carrier = extract_carrier(run.model, config, search_length=256)
    assert carrier.values.shape == carrier.offsets.shape and carrier.values.dtype.kind == "f"
    heatmap = attention_heatmap(run.model, config, 32, max_cells=16)
    assert heatmap.weights.shape == (16, 16)
    weights, _pool = head_map(run.model, config, 16, 0, 0, samples=2, max_cells=16)
    assert weights.shape == (16, 16)
    checks = check_equivariance(run.model, 5, 2, shifts=(0, 10))
    assert checks[0].max_abs_difference == 0.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("encoding", ["rope", "learned", "alibi", "nope"])
def test_the_transformer_trains_and_is_analysed_on_the_device(device: str, encoding: str) -> None:
    config = with_changes(RunConfig(), encoding=encoding, task="shift", n_layers=2, n_heads=2, steps=3,
                          max_positions=64, **TINY)
    run = train(config, device)
    assert on_device(run.model, device) and math.isfinite(run.loss)
    report = evaluate_sequence(run.model, config, [16], samples=4)[0]
    assert 0.0 <= report.accuracy <= 1.0
    heads = analyse_heads(run.model, config, samples=8)
    assert {(h.layer, h.head) for h in heads} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert attention_heatmap(run.model, config, 16, max_cells=8, layer=1, head=1).weights.shape == (8, 8)
    assert len(check_equivariance(run.model, 5, 2, shifts=(0, 10))) == 2


@pytest.mark.gpu
def test_a_transformer_trained_on_cuda_stays_near_the_cpu_training() -> None:
    """The same batches on both (a CPU generator); after 10 steps the losses agree to 1e-3."""
    config = with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2, steps=10, **TINY)
    on_cpu, on_cuda = Training(config, "cpu"), Training(config, "cuda")
    for _ in zip(on_cpu, on_cuda):
        pass
    assert on_cuda.history["loss"] == pytest.approx(on_cpu.history["loss"], rel=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_a_training_child_process_trains_on_the_device(tmp_path: Path, device: str) -> None:
    """The server's mode: the training runs in a child process of its own, on the pool's device."""
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device=device, isolate=True)
    try:
        ticket = pool.submit(with_changes(RunConfig(), steps=6, seed=31, **TINY))
        deadline = time.monotonic() + 180
        while pool.status(ticket).state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
        status = pool.status(ticket)
        assert status.state == "done", status.error
        stored = pool.store.load(status.stored_run_id)
        assert stored.steps == 6 and stored.training_device == str(resolve_device(device))
    finally:
        pool.close()

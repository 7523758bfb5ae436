"""The device check of issue 15 (docs/device.md): one line for each of

    environment   torch, its CUDA build, the GPU's name and memory
    training      steps/s on the device against the CPU; whether a rerun on the device is bit-identical;
                  how far the device's weights end from the CPU's (same seed, same batches)
    evaluation    2^20 × 256 on the device against the CPU: time, peak memory, accuracy
    cpu-only load a run trained on the device, loaded by a process that sees no GPU (CUDA_VISIBLE_DEVICES=)
    gpu tests     the `gpu`-marked tests (pytest -m gpu)

    scripts/device_check.sh                    # DEVICE=auto: CUDA, then MPS, then the CPU
    DEVICE=cpu scripts/device_check.sh         # a dry run: the CPU stands in for the device

With the CPU as the device (a dry run) the sizes are smaller (`DRY`) and the output says so; every
line is still printed. Each line starts with `ok` or `FAIL`; the exit status is 1 when any line
failed. Under 5 minutes on one GPU with `FULL` (the CPU's share, 2^20 × 256 once and a few hundred
training steps, is most of it). Nothing here is needed by the lab: it measures, tests/unit/test_device_check.py
runs the dry run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from lengen.runtime import device_name
from lengen.store import RunStore
from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.initial import initial_model
from lengen_core.training import resolve_device, train

ROOT = Path(__file__).resolve().parents[1]
LABELS = ("environment", "training", "evaluation", "cpu-only load", "gpu tests")


@dataclass(frozen=True)
class Sizes:
    train_steps: int  # per training (three on the device or the CPU stand-in, one on the CPU)
    eval_length: int
    eval_samples: int
    load_length: int  # the evaluation the CPU-only process repeats
    changes: tuple[tuple[str, int], ...] = ()  # to the default config
    what: str = "the default config"


FULL = Sizes(train_steps=300, eval_length=1 << 20, eval_samples=256, load_length=4_096)
DRY = Sizes(train_steps=20, eval_length=1 << 13, eval_samples=32, load_length=256,
            changes=(("d_model", 32), ("batch_size", 32)), what="a small config (d_model 32, batch 32)")


def check_config(sizes: Sizes) -> RunConfig:
    """The default retrieval config (a RoPE head), or the dry run's smaller one, for `sizes.train_steps`
    steps without an early stop."""
    return with_changes(RunConfig(), steps=sizes.train_steps, keep_training=True, **dict(sizes.changes))


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 of every weight's bytes on the CPU, by name: equal digests, bit-identical weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def largest_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """max |a − b| over every weight, relative to that weight's largest magnitude."""
    worst = 0.0
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        x, y = x.detach().cpu().double(), y.detach().cpu().double()
        worst = max(worst, float((x - y).abs().max() / x.abs().max().clamp(min=1e-12)))
    return worst


def reset_peak_rss() -> bool:
    """Reset this process's peak resident memory (VmHWM) to its current size (Linux ≥ 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def measured(device: torch.device, work: Callable[[], object]) -> tuple[object, float, int | None]:
    """(result, seconds, peak memory in bytes) of `work` on `device`: allocated device memory on CUDA,
    the process's peak resident memory on the CPU (None where neither can be read: MPS)."""
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    reset = device.type == "cpu" and reset_peak_rss()
    start = time.perf_counter()
    result = work()
    synchronize(device)
    seconds = time.perf_counter() - start
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    elif reset:
        peak = peak_rss_bytes()
    else:
        peak = None
    return result, seconds, peak


def peak_text(device: torch.device, value: int | None) -> str:
    """What `measured` read, named: the device memory allocated (CUDA), the whole process's resident memory (CPU)."""
    if value is None:
        return "peak memory not measured"
    what = "peak allocated" if device.type == "cuda" else "peak RSS of the process"
    return f"{what} {value / 2**20:,.0f} MB"


def environment(device: torch.device, dry: bool) -> tuple[bool, str]:
    cuda = torch.version.cuda or "none (a CPU build)"
    parts = [f"torch {torch.__version__}", f"CUDA build {cuda}", f"CUDA available: {torch.cuda.is_available()}"]
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        parts.append(f"GPU {torch.cuda.get_device_name(device)} ({total / 2**30:.0f} GiB)")
        parts.append(f"CUBLAS_WORKSPACE_CONFIG={os.environ.get('CUBLAS_WORKSPACE_CONFIG', 'unset')}")
    parts.append(f"device {device_name(device)}")
    if dry:
        parts.append("dry run: the CPU stands in for the device, at smaller sizes")
    return True, ", ".join(parts)


def training(device: torch.device, sizes: Sizes):
    """Two trainings on the device (the second's rate, warm, is reported) and one on the CPU."""
    config = check_config(sizes)
    first = train(config, str(device))
    rerun = train(config, str(device))
    on_cpu = train(config, "cpu")
    identical = weights_digest(first.model) == weights_digest(rerun.model)
    rate = sizes.train_steps / rerun.train_seconds
    cpu_rate = sizes.train_steps / on_cpu.train_seconds
    apart = largest_difference(on_cpu.model, rerun.model)
    text = (f"{sizes.train_steps} steps of {sizes.what}: {device} {rate:,.1f} steps/s, cpu {cpu_rate:,.1f} steps/s "
            f"({rate / cpu_rate:.2f}×); rerun on {device} bit-identical: {'yes' if identical else 'NO'}; "
            f"{device} vs cpu weights: largest relative difference {apart:.1e}")
    return identical, text, first


def evaluation(device: torch.device, model: torch.nn.Module, config: RunConfig, sizes: Sizes) -> tuple[bool, str]:
    """The same weights evaluated on the device and on the CPU at the check's length: time, peak memory,
    accuracy (equal to one answer: a near-tie may round differently) and target mass."""
    length, samples = sizes.eval_length, sizes.eval_samples
    cpu_model = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    evaluate(model, config, [1_024], samples=8)  # a warm-up: the device's first kernels are not timed
    (report,), seconds, peak = measured(device, lambda: evaluate(model, config, [length], samples=samples))
    on_cpu = initial_model(config)  # the same weights on the CPU
    on_cpu.load_state_dict(cpu_model)
    on_cpu.eval()
    (cpu_report,), cpu_seconds, cpu_peak = measured(torch.device("cpu"),
                                                    lambda: evaluate(on_cpu, config, [length], samples=samples))
    answers = round(abs(report.accuracy - cpu_report.accuracy) * samples)
    equal = "equal" if answers == 0 else f"{answers} of {samples} answers apart"
    text = (f"{length:,} tokens × {samples}: {device} {seconds:.2f} s, {peak_text(device, peak)}; cpu {cpu_seconds:.2f} s, "
            f"{peak_text(torch.device('cpu'), cpu_peak)} ({cpu_seconds / seconds:.1f}×); accuracy {report.accuracy:.4f} vs "
            f"{cpu_report.accuracy:.4f} ({equal}); target mass {report.target_mass:.6f} vs {cpu_report.target_mass:.6f}")
    return answers <= 1, text


def cpu_only_load(device: torch.device, run, sizes: Sizes) -> tuple[bool, str]:
    """Save the device-trained run and load it in a child process that sees no GPU."""
    expected = evaluate(run.model, run.config, [sizes.load_length], samples=64)[0].accuracy
    with tempfile.TemporaryDirectory(prefix="lengen-device-check-") as root:
        RunStore(Path(root)).save(run)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "bench.device_check", "--load", root, run.run_id,
                               str(sizes.load_length)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
    if done.returncode != 0:
        return False, f"the CPU-only process failed: {done.stderr.strip().splitlines()[-1:]}"
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    same = loaded["digest"] == weights_digest(run.model)
    ok = (not loaded["cuda"] and loaded["device"] == "cpu" and loaded["trained_on"] == run.training_device and same
          and abs(loaded["accuracy"] - expected) <= 1 / 64)
    text = (f"run trained on {run.training_device}, loaded where CUDA is {'' if loaded['cuda'] else 'not '}available, "
            f"on {loaded['device']} (trained_on {loaded['trained_on']}); weights identical: {'yes' if same else 'NO'}; "
            f"accuracy at {sizes.load_length:,} × 64: {loaded['accuracy']:.4f} vs {expected:.4f} on {device}")
    return ok, text


def load_without_gpu(root: str, run_id: str, length: int) -> None:
    """The child of `cpu_only_load`: load with device auto, evaluate, print one JSON line."""
    run = RunStore(Path(root)).load(run_id, "auto")
    report = evaluate(run.model, run.config, [length], samples=64)[0]
    print(json.dumps({"cuda": torch.cuda.is_available(), "device": run.device, "trained_on": run.training_device,
                      "digest": weights_digest(run.model), "accuracy": report.accuracy}))


def gpu_marked_files() -> list[str]:
    """The test files with `gpu`-marked tests."""
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                  if "mark.gpu" in path.read_text(errors="replace"))


def gpu_tests(device: torch.device) -> tuple[bool, str]:
    files = gpu_marked_files()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=600, check=False)
    seconds = time.perf_counter() - start
    summary = next((line.strip("= ") for line in reversed(done.stdout.splitlines()) if line.strip()), "no output")
    summary = summary.rsplit(" in ", 1)[0]  # pytest's own time; the whole call's is given below
    ok = done.returncode == 0 and (device.type != "cuda" or "skipped" not in summary)
    where = "" if torch.cuda.is_available() else " (no CUDA here: skipped, as they should be)"
    return ok, f"pytest -m gpu over {len(files)} files: {summary} in {seconds:.0f} s{where}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.device_check", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cuda, mps or cpu (cpu: a dry run)")
    parser.add_argument("--full", action="store_true", help="the full sizes even on the CPU")
    parser.add_argument("--load", nargs=3, metavar=("ROOT", "RUN_ID", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load:
        root, run_id, length = args.load
        load_without_gpu(root, run_id, int(length))
        return 0
    try:
        device = resolve_device(args.device)
    except ValueError as error:  # an explicit device this machine lacks
        print(f"device_check: error: {error}", file=sys.stderr)
        return 2
    dry = device.type == "cpu" and not args.full
    sizes = DRY if dry else FULL
    failed = False

    def line(label: str, ok: bool, text: str) -> None:
        nonlocal failed
        failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {text}", flush=True)

    line("environment", *environment(device, dry))
    ok, text, run = training(device, sizes)
    line("training", ok, text)
    line("evaluation", *evaluation(device, run.model, run.config, sizes))
    line("cpu-only load", *cpu_only_load(device, run, sizes))
    line("gpu tests", *gpu_tests(device))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

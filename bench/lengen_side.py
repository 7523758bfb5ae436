"""The lengen half of the benchmark (project venv), and the subprocess call to the peer (peer venv).

Seed policy, both sides: run r uses seed r; the weights come from each library's own initialisation
with that seed, the batches from lengen's `sample_batch` with the data generator seeded
`seed + DATA_SEED_OFFSET`, so both sides train on the very same tokens. Evaluation uses the same
256 sequences per length on both sides (`sequence_tokens`, seed 12345).

"Seconds to 99%": wall time from the first step to the first step at which the mean batch accuracy
of the last `window` steps reaches 0.99 (the same rule on both sides).
"""

from __future__ import annotations

import cProfile
import itertools
import json
import math
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from bench.common import PEER_PYTHON, ROOT, median, python_env
from bench.probe import save_model
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import SETTINGS, RunConfig, with_changes
from lengen_core.training import Training


def bench_config(encoding: str, steps: int, **changes) -> RunConfig:
    """Today's default config (`RunConfig()`: retrieval, V 16, offset 3, L_train 16, batch 128, Adam 3e-3, and
    the default d_model and qk_init), with `encoding`, `steps` steps, never stopping early, and `changes`."""
    return with_changes(RunConfig(), encoding=encoding, steps=steps, keep_training=True, **changes)


def reached_at(accuracies: Sequence[float], threshold: float, window: int) -> int | None:
    """The first step (1-based) where the mean batch accuracy of the last `window` steps is ≥ threshold."""
    for step in range(window, len(accuracies) + 1):
        if sum(accuracies[step - window : step]) / window >= threshold:
            return step
    return None


def train_once(config: RunConfig, threshold: float, window: int) -> tuple[dict, torch.nn.Module]:
    training = Training(config, device="cpu")
    accuracies, times = [], []
    start = time.perf_counter()
    for progress in training:
        accuracies.append(progress.accuracy)
        times.append(time.perf_counter() - start)
    run = training.finish()
    step = reached_at(accuracies, threshold, window)
    steps = len(times)
    return {"seed": config.train.seed, "steps": steps, "seconds": times[-1], "steps_per_second": steps / times[-1],
            "steps_to_target": step, "seconds_to_target": None if step is None else times[step - 1],
            "final_accuracy": accuracies[-1]}, run.model


def summarise_training(runs: list[dict]) -> dict:
    reached = [r for r in runs if r["steps_to_target"] is not None]
    return {
        "runs": runs,
        "steps_per_second": median([r["steps_per_second"] for r in runs]),
        "steps_to_target": median([r["steps_to_target"] for r in reached]) if reached else None,
        "seconds_to_target": median([r["seconds_to_target"] for r in reached]) if reached else None,
        "reached_target": f"{len(reached)}/{len(runs)}",
    }


def train_lengen(encoding: str, runs: int, steps: int, threshold: float, window: int,
                 d_model: int) -> tuple[dict, torch.nn.Module]:
    """`runs` seeds at width `d_model`; the seed-0 model is returned for evaluation."""
    results, first = [], None
    for seed in range(runs):
        result, model = train_once(bench_config(encoding, steps, seed=seed, d_model=d_model), threshold, window)
        results.append(result)
        first = model if first is None else first
    return summarise_training(results), first


def run_peer(encoding: str, runs: int, steps: int, lengths: Sequence[int], samples: int, eval_runs: int,
             threshold: float, window: int, threads: int, timeout: float, d_model: int) -> dict:
    """The peer script in its own venv, its model `d_model` wide; {"error": ...} when it is not installed or fails."""
    if not PEER_PYTHON.exists():
        return {"error": "peer environment absent: run bash bench/setup_peer.sh"}
    config = bench_config(encoding, steps, d_model=d_model)
    if config.train.weight_decay:
        return {"error": f"peer.py trains with Adam without weight decay; lengen's config has {config.train.weight_decay}"}
    command = [str(PEER_PYTHON), str(ROOT / "bench" / "peer.py"), "--encoding", encoding, "--runs", str(runs),
               "--steps", str(steps), "--d-model", str(d_model),
               # the optimiser of lengen's config at that width, so the two sides differ only in their code
               "--lr", repr(config.train.learning_rate), "--batch-size", str(config.train.batch_size), "--samples", str(samples), "--eval-runs", str(eval_runs),
               "--threshold", str(threshold), "--window", str(window), "--threads", str(threads),
               "--lengths", *map(str, lengths)]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env=python_env(threads), check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"peer did not finish within {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": f"peer failed (exit {done.returncode}): {done.stderr.strip()[-800:]}"}
    result = json.loads(done.stdout)
    result["training_summary"] = summarise_training(result["training"])
    return result


def evaluate_lengen(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int], samples: int,
                    runs: int) -> list[dict]:
    """Per length, the median wall time of `runs` calls of `evaluate` (the results are deterministic)."""
    rows = []
    for length in lengths:
        seconds, report = [], None
        for _ in range(runs):
            start = time.perf_counter()
            report = evaluate(model, config, [length], samples=samples)[0]
            seconds.append(time.perf_counter() - start)
        rows.append({"length": length, "seconds": median(seconds), "runs": runs, "accuracy": report.accuracy,
                     "target_mass": report.target_mass})
    return rows


def compare_evaluation(lengen: list[dict], peer: list[dict] | None) -> dict:
    result = {"lengen": lengen, "lengen_total_seconds": sum(r["seconds"] for r in lengen)}
    if peer:
        result["peer"] = peer
        result["peer_total_seconds"] = sum(r["seconds"] for r in peer)
        result["speedup_total"] = result["peer_total_seconds"] / result["lengen_total_seconds"]
        result["speedup_by_length"] = {str(a["length"]): b["seconds"] / a["seconds"] for a, b in zip(lengen, peer)}
    return result


def probe(model_dir: Path | None, length: int, samples: int, threads: int, profile: Path | None = None,
          timeout: float = 900, stored: tuple[Path, str] | None = None) -> dict:
    """`bench.probe` in a fresh process: wall seconds and peak memory of one evaluation, of the model saved in
    `model_dir` or of the run `stored` = (LENGEN_HOME, run id)."""
    source = ["--model", str(model_dir)] if stored is None else ["--home", str(stored[0]), "--run", stored[1]]
    command = [sys.executable, "-m", "bench.probe", *source, "--length",
               str(length), "--samples", str(samples), "--threads", str(threads)]
    if profile is not None:
        command += ["--profile", str(profile)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=python_env(threads),
                          check=False)
    if done.returncode != 0:
        return {"length": length, "error": done.stderr.strip()[-800:]}
    return json.loads(done.stdout)


def evaluate_long(model_dir: Path, lengths: Sequence[int], samples: int, repeats: int, threads: int) -> list[dict]:
    """Each length `repeats` times, each in a fresh process: median seconds, largest peak memory."""
    return [summarise_fresh([probe(model_dir, length, samples, threads) for _ in range(repeats)]) for length in lengths]


def cli_flags(config: RunConfig) -> list[str]:
    """The command line's flags for `config`: one per setting that differs from the default (`SETTINGS`)."""
    flags: list[str] = []
    default = RunConfig()
    for name, setting in SETTINGS.items():
        value = getattr(getattr(config, setting.section), name)
        if value == getattr(getattr(default, setting.section), name):
            continue
        if setting.kind is bool:
            flags.append(f"--{setting.flag}")  # on: the command line's switches are off by default
        else:
            flags += [f"--{setting.flag}", str(value)]
    return flags


def cli_train(home: Path, config: RunConfig, threads: int, timeout: float = 900) -> str:
    """`python -m lengen train` of `config` into the store at `home`, as a person makes a run; its run id."""
    done = subprocess.run([sys.executable, "-m", "lengen", "train", *cli_flags(config), "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**python_env(threads), "LENGEN_HOME": str(home)}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"lengen train failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout)["run_id"]


def timed_command(arguments: Sequence[str], home: Path, threads: int, timeout: float = 900) -> dict:
    """`python -m lengen ARGUMENTS` in a fresh process with LENGEN_HOME=`home`: wall seconds from launch to
    exit (the interpreter's start and the imports included), the process's peak memory (its own `ru_maxrss`,
    from wait4), its exit status and output."""
    command = [sys.executable, "-m", "lengen", *arguments]
    env = {**python_env(threads), "LENGEN_HOME": str(home)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage, not every child's
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"seconds": seconds, "peak_rss_bytes": usage.ru_maxrss * 1024, "returncode": process.returncode,
                "stdout": out.read(), "stderr": err.read()}


def cli_evaluate(home: Path, run_id: str, length: int, samples: int, threads: int, timeout: float = 900) -> dict:
    """`python -m lengen evaluate RUN --lengths L --samples S --json`, as typed at a terminal (`timed_command`)."""
    done = timed_command(["evaluate", run_id, "--lengths", str(length), "--samples", str(samples), "--json"], home,
                         threads, timeout)
    if done["returncode"] != 0:
        return {"length": length, "error": f"exit {done['returncode']}: {done['stderr'].strip()[-800:]}"}
    answer = json.loads(done["stdout"])
    row = answer["lengths"][0]
    return {"length": length, "samples": samples, "seconds": done["seconds"], "peak_rss_bytes": done["peak_rss_bytes"],
            "accuracy": row["accuracy"], "target_mass": row["target_mass"],
            "predicted_accuracy": row.get("predicted_accuracy"), "predicted_horizon": answer.get("predicted_horizon"),
            "predicted_horizon_note": answer.get("predicted_horizon_note"), "stderr": done["stderr"].strip()[-300:]}


def cli_startup(home: Path, threads: int) -> dict:
    """What any command pays before its work: `python -m lengen runs --json` on a store of one run."""
    done = timed_command(["runs", "--json"], home, threads, timeout=300)
    if done["returncode"] != 0:
        return {"error": f"exit {done['returncode']}: {done['stderr'].strip()[-800:]}"}
    return {"seconds": done["seconds"], "peak_rss_bytes": done["peak_rss_bytes"]}


def summarise_fresh(rows: list[dict]) -> dict:
    """Fresh-process repeats: the median seconds, the largest peak memory, the first row's other fields."""
    good = [r for r in rows if "error" not in r]
    if not good:
        return rows[0] if rows else {"error": "not run"}
    summary = {**good[0], "seconds": median([r["seconds"] for r in good]), "runs_seconds": [r["seconds"] for r in good],
               "peak_rss_bytes": max(r["peak_rss_bytes"] for r in good), "repeats": len(good)}
    if len(good) < len(rows):
        summary["errors"] = [r["error"] for r in rows if "error" in r]
    return summary


def loglog_slopes(rows: list[dict], key: str) -> list[float | None]:
    """d log(value) / d log(length) between consecutive rows (None for the first)."""
    slopes: list[float | None] = [None]
    for a, b in itertools.pairwise(rows):
        if a.get(key) and b.get(key):
            slopes.append(math.log(b[key] / a[key]) / math.log(b["length"] / a["length"]))
        else:
            slopes.append(None)
    return slopes


def prediction(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int], runs: int) -> dict:
    seconds, cpu = [], []
    for _ in range(runs):
        start, used = time.perf_counter(), time.process_time()
        predictions = predict(model, config, lengths)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)  # this process's CPU time: less moved by other work than the wall's
    return {"lengths": list(lengths), "seconds": median(seconds), "runs": seconds, "cpu_seconds": median(cpu),
            "target_mass_at_longest": predictions[-1].target_mass, "accuracy_at_longest": predictions[-1].accuracy}


def geometric_lengths(low: int, high: int, count: int) -> list[int]:
    ratio = (high / low) ** (1 / (count - 1))
    return sorted({round(low * ratio**i) for i in range(count)})


def training_scaling(steps: int, d_models: Sequence[int], train_lengths: Sequence[int]) -> dict:
    """Steps/s of the default config, varying d_model (L_train 16), then L_train (d_model 64)."""
    def rate(**changes) -> dict:
        result, _ = train_once(bench_config("rope", steps, **changes), threshold=0.99, window=10)
        return {**changes, "steps": steps, "seconds": result["seconds"], "steps_per_second": result["steps_per_second"],
                "ms_per_step": 1000 * result["seconds"] / steps}

    return {"d_model": [rate(d_model=d) for d in d_models],
            "train_length": [rate(train_length=n) for n in train_lengths]}


def top_functions(profile_file: Path, count: int = 15) -> list[dict]:
    stats = pstats.Stats(str(profile_file))
    total = stats.total_tt
    rows = []
    for (filename, line, name), (_, calls, tottime, cumtime, _) in sorted(
        stats.stats.items(), key=lambda item: item[1][2], reverse=True
    )[:count]:
        short = filename.replace(str(ROOT) + "/", "")
        short = short.split("site-packages/")[-1]
        rows.append({"function": f"{short}:{line}({name})", "calls": calls, "tottime": tottime, "cumtime": cumtime,
                     "share": tottime / total if total else None})
    return rows


def write_profile_text(profile_file: Path, text_file: Path, count: int = 30) -> None:
    with text_file.open("w") as stream:
        stats = pstats.Stats(str(profile_file), stream=stream)
        stats.sort_stats("tottime").print_stats(count)
        stats.sort_stats("cumulative").print_stats(count)


def profile_training(config: RunConfig, out: Path) -> dict:
    profiler = cProfile.Profile()
    profiler.enable()
    train_once(config, threshold=0.99, window=10)
    profiler.disable()
    profiler.dump_stats(out)
    write_profile_text(out, out.with_suffix(".txt"))
    return {"file": out.name, "text": out.with_suffix(".txt").name, "top_by_own_time": top_functions(out)}


def profile_prediction(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int], out: Path) -> dict:
    profiler = cProfile.Profile()
    profiler.enable()
    start = time.perf_counter()
    predict(model, config, lengths)
    seconds = time.perf_counter() - start
    profiler.disable()
    profiler.dump_stats(out)
    write_profile_text(out, out.with_suffix(".txt"))
    return {"file": out.name, "text": out.with_suffix(".txt").name, "lengths": len(lengths),
            "seconds_under_profiler": seconds, "top_by_own_time": top_functions(out)}


def profile_evaluation(model_dir: Path, length: int, samples: int, threads: int, out: Path) -> dict:
    result = probe(model_dir, length, samples, threads, profile=out)
    if "error" in result:
        return result
    write_profile_text(out, out.with_suffix(".txt"))
    return {"file": out.name, "text": out.with_suffix(".txt").name, "length": length,
            "seconds_under_profiler": result["seconds"], "top_by_own_time": top_functions(out)}


def temporary_model_dir(model: torch.nn.Module, config: RunConfig) -> Path:
    return save_model(model, config, Path(tempfile.mkdtemp(prefix="lengen-bench-")))

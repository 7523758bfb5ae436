"""Benchmarks of issue 6: `python -m bench` (or `bash bench/run.sh`); `--quick` for a smoke run.

Prints one table per part and writes `latest.json` and `latest.md` (and profiles) to `--out`
(default bench/results/). Timings are wall clock on whatever else the machine is doing: the JSON
records the load average at the start and the end so a shared machine shows.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench import lengen_side as lengen
from bench.common import RESULTS, TARGETS, git_commit, machine, versions
from bench.report import render

PARTS = ("training", "evaluation", "long", "prediction", "app", "scaling", "profile")
NOTE = ("Wall-clock timings. Ratios compare the two libraries run back to back on the same machine and torch "
        "build; absolute figures depend on the machine's load (see load averages in latest.json).")


@dataclass
class Settings:
    quick: bool = False
    runs: int = 3
    steps: int = 300
    threshold: float = 0.99
    window: int = 10
    encodings: tuple[str, ...] = ("rope", "learned")
    compare_lengths: tuple[int, ...] = (16, 64, 256, 1024, 4096)
    samples: int = 256
    eval_runs: int = 3
    peer_eval_runs: int = 1
    long_lengths: tuple[int, ...] = (1 << 16, 1 << 18, 1 << 20)
    long_repeats: int = 1
    scaling_lengths: tuple[int, ...] = tuple(1 << p for p in range(10, 21))
    prediction_count: int = 20
    prediction_runs: int = 3
    scaling_steps: int = 100
    d_models: tuple[int, ...] = (32, 64, 128, 256)
    train_lengths: tuple[int, ...] = (16, 64, 256)
    peer_timeout: float = 1800
    app_repeats: int = 3  # cold servers the app part starts; its figures are their medians
    threads: int = 0
    parts: tuple[str, ...] = PARTS
    peer: bool = True


QUICK = Settings(quick=True, runs=1, steps=30, encodings=("rope",), compare_lengths=(16, 64), samples=32,
                 eval_runs=1, long_lengths=(1 << 10, 1 << 12), scaling_lengths=(1 << 8, 1 << 10, 1 << 12),
                 prediction_runs=1, scaling_steps=5, app_repeats=1, d_models=(32, 64), train_lengths=(16, 32), peer_timeout=600)
"""Tiny sizes: the whole pipeline in about a minute (the smoke test runs its lengen parts)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(settings: Settings, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    began = time.perf_counter()
    results: dict = {"meta": {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(), "machine": machine(), "versions": versions(), "note": NOTE,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(settings).items()},
    }}
    parts, model_dir = set(settings.parts), None
    models: dict = {}

    if parts & {"training", "evaluation", "long", "prediction", "scaling", "profile"}:
        results["training"], results["evaluation"] = {}, {}
        for encoding in settings.encodings:
            log(f"training: lengen {encoding}, {settings.runs} × {settings.steps} steps")
            summary, models[encoding] = lengen.train_lengen(encoding, settings.runs, settings.steps,
                                                            settings.threshold, settings.window)
            peer = _peer(settings, encoding, parts) if settings.peer else {"error": "peer skipped (--no-peer)"}
            if peer.get("versions"):
                results["meta"]["peer_versions"] = peer["versions"]
                results["meta"]["peer_threads"] = peer["threads"]
                results["meta"]["peer_model"] = peer["model"]
            if "training" in parts:
                part = {"lengen": summary}
                if "training_summary" in peer:
                    part["peer"] = peer["training_summary"]
                    part["speedup"] = summary["steps_per_second"] / peer["training_summary"]["steps_per_second"]
                else:
                    part["peer_error"] = peer.get("error")
                results["training"][encoding] = part
            if "evaluation" in parts:
                log(f"evaluation: lengen {encoding} at {list(settings.compare_lengths)}")
                rows = lengen.evaluate_lengen(models[encoding], lengen.bench_config(encoding, settings.steps),
                                              settings.compare_lengths, settings.samples, settings.eval_runs)
                part = lengen.compare_evaluation(rows, peer.get("evaluation"))
                if "evaluation" not in peer:
                    part["peer_error"] = peer.get("error")
                results["evaluation"][encoding] = part

    config = lengen.bench_config("rope", settings.steps)
    rope = models.get("rope")
    if rope is not None:
        model_dir = lengen.temporary_model_dir(rope, config)
    try:
        if "long" in parts and model_dir:
            log(f"evaluation at long lengths: {list(settings.long_lengths)}")
            results["evaluation_long"] = lengen.evaluate_long(model_dir, settings.long_lengths, settings.samples,
                                                              settings.long_repeats, settings.threads)
        if "prediction" in parts and rope is not None:
            lengths = lengen.geometric_lengths(16, max(settings.long_lengths), settings.prediction_count)
            log(f"prediction at {len(lengths)} lengths")
            results["prediction"] = lengen.prediction(rope, config, lengths, settings.prediction_runs)
        if "app" in parts:
            from bench.app_bench import measure

            log(f"app: streamlit + chromium, {settings.app_repeats} cold servers")
            results["app"] = measure(settings.app_repeats)
        if "scaling" in parts:
            results["scaling"] = _scaling(settings, model_dir, results.get("evaluation_long", []))
        if "profile" in parts and model_dir:
            log("profiles")
            longest = max(settings.long_lengths)
            results["profiles"] = {
                f"evaluation at 2^{longest.bit_length() - 1}": lengen.profile_evaluation(
                    model_dir, longest, settings.samples, settings.threads, out / "profile_evaluation.prof"),
                f"training ({settings.steps} steps)": lengen.profile_training(config, out / "profile_training.prof"),
            }
            if rope is not None:
                lengths = lengen.geometric_lengths(16, longest, settings.prediction_count)
                results["profiles"][f"prediction ({len(lengths)} lengths)"] = lengen.profile_prediction(
                    rope, config, lengths, out / "profile_prediction.prof")
    finally:
        if model_dir:
            shutil.rmtree(model_dir, ignore_errors=True)

    results["targets"] = _targets(results)
    results["meta"]["duration_seconds"] = time.perf_counter() - began
    results["meta"]["load_average_at_end"] = list(os.getloadavg())
    (out / "latest.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "latest.md").write_text(render(results) + "\n")
    return results


def _peer(settings: Settings, encoding: str, parts: set[str]) -> dict:
    if not parts & {"training", "evaluation"}:
        return {}
    log(f"peer: TransformerLens {encoding} (its own venv)")
    return lengen.run_peer(encoding, settings.runs, settings.steps,
                           settings.compare_lengths if "evaluation" in parts else [], settings.samples,
                           settings.peer_eval_runs, settings.threshold, settings.window, settings.threads,
                           settings.peer_timeout)


def _scaling(settings: Settings, model_dir: Path | None, long_rows: list[dict]) -> dict:
    scaling: dict = {}
    if model_dir:
        known = {r["length"]: r for r in long_rows if "error" not in r}
        rows = []
        for length in settings.scaling_lengths:
            if length not in known:
                log(f"scaling: evaluation at 2^{length.bit_length() - 1}")
            rows.append(known.get(length) or lengen.evaluate_long(model_dir, [length], settings.samples, 1,
                                                                    settings.threads)[0])
        for row, time_slope, memory_slope in zip(rows, lengen.loglog_slopes(rows, "seconds"),
                                                 lengen.loglog_slopes(rows, "peak_rss_bytes")):
            row["seconds_slope"], row["peak_rss_slope"] = time_slope, memory_slope
        scaling["evaluation"] = rows
    log("scaling: training vs d_model and L_train")
    scaling["training"] = lengen.training_scaling(settings.scaling_steps, settings.d_models, settings.train_lengths)
    return scaling


def _targets(results: dict) -> dict:
    values: dict = {}
    rope_training = results.get("training", {}).get("rope", {})
    values["training_speedup"] = rope_training.get("speedup")
    values["evaluation_speedup"] = results.get("evaluation", {}).get("rope", {}).get("speedup_total")
    longest = {r["length"]: r for r in results.get("evaluation_long", []) if "error" not in r}.get(1 << 20)
    values["evaluation_2^20_seconds"] = longest["seconds"] if longest else None
    values["evaluation_2^20_peak_gb"] = longest["peak_rss_bytes"] / 1e9 if longest else None
    prediction = results.get("prediction")
    values["prediction_seconds"] = prediction["seconds"] if prediction and max(prediction["lengths"]) >= 1 << 20 else None
    app = results.get("app", {})
    for key, figure in (("app_start_seconds", "start_seconds"), ("app_preset_dilution_seconds", "preset_dilution_seconds"),
                        ("app_page_switch_seconds", "page_switch_seconds"),
                        ("app_first_live_update_seconds", "first_live_update_seconds")):
        values[key] = app.get(figure)
    return {key: TARGETS[key].check(value) for key, value in values.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which parts to run")
    parser.add_argument("--no-peer", action="store_true", help="lengen only (no TransformerLens subprocess)")
    parser.add_argument("--runs", type=int, help="seeds per training measurement (default 3)")
    parser.add_argument("--long-repeats", type=int, help="fresh-process runs per long length (default 1)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads on both sides (0: torch's default)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where latest.json, latest.md and profiles go")
    args = parser.parse_args(argv)
    overrides = {"parts": tuple(args.parts), "peer": not args.no_peer, "threads": args.threads}
    if args.runs:
        overrides["runs"] = args.runs
    if args.long_repeats:
        overrides["long_repeats"] = args.long_repeats
    settings = dataclasses.replace(QUICK if args.quick else Settings(), **overrides)
    results = run(settings, args.out)
    print(render(results))


if __name__ == "__main__":
    main()

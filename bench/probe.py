"""One lengen evaluation in a fresh process, so its peak memory is its own.

    python -m bench.probe --model DIR --length 1048576 [--samples 256] [--profile FILE.prof]
    python -m bench.probe --home LENGEN_HOME --run RUN_ID --length 1048576   # a run in a store
    python -m bench.probe --untrained --set vocab_size=64 --set d_model=512 --length 65536 --samples 1024

`DIR` holds `config.json` and `weights.pt` (written by `save_model`); `--run` reads a stored run
(`RunStore`) from the store at `--home`; `--untrained` evaluates the
initial weights of the default config changed by each `--set name=value` instead (memory and time
do not depend on the weights). Prints one JSON object: wall seconds of `evaluate`, its CPU seconds (all threads:
steadier than wall seconds on a shared machine), the process's
resident memory before evaluating (torch imported, model loaded) and its peak (VmHWM) after,
accuracy and target mass.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import sys
import time
from pathlib import Path

import torch

from bench.common import peak_rss_bytes, rss_bytes
from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.head import build_model


def save_model(model: torch.nn.Module, config: RunConfig, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_dict()))
    torch.save(model.state_dict(), directory / "weights.pt")
    return directory


def load_model(directory: Path) -> tuple[torch.nn.Module, RunConfig]:
    config = RunConfig.from_dict(json.loads((directory / "config.json").read_text()))
    model = build_model(config, torch.Generator().manual_seed(config.train.seed))
    model.load_state_dict(torch.load(directory / "weights.pt", weights_only=True))
    return model.eval(), config


def untrained_model(settings: list[str]) -> tuple[torch.nn.Module, RunConfig]:
    """The initial weights of the default config with `name=value` changes (numbers or words)."""
    from lengen_core.models.initial import initial_model

    changes: dict = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        try:
            changes[name] = int(value)
        except ValueError:
            try:
                changes[name] = float(value)
            except ValueError:
                changes[name] = value
    config = with_changes(RunConfig(), **changes)
    return initial_model(config).eval(), config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", type=Path)
    source.add_argument("--untrained", action="store_true", help="the initial weights of the default config")
    source.add_argument("--run", help="a stored run's id, in the store at --home")
    parser.add_argument("--home", type=Path, default=None, help="with --run: the store's folder (LENGEN_HOME)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="with --untrained")
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the evaluation here")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.run:
        from lengen.store import RunStore

        run = RunStore(args.home).load(args.run)
        model, config = run.model, run.config
    else:
        model, config = untrained_model(args.set) if args.untrained else load_model(args.model)
    baseline = rss_bytes()
    profiler = cProfile.Profile() if args.profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    report = evaluate(model, config, [args.length], samples=args.samples)[0]
    if profiler:
        profiler.disable()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if profiler:
        profiler.dump_stats(args.profile)
    json.dump({"length": args.length, "samples": args.samples, "seconds": seconds,
               "cpu_seconds": cpu_seconds, "baseline_rss_bytes": baseline,
               "peak_rss_bytes": peak_rss_bytes(), "accuracy": report.accuracy, "target_mass": report.target_mass,
               "threads": torch.get_num_threads()}, sys.stdout)


if __name__ == "__main__":
    main()

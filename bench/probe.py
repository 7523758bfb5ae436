"""One lengen evaluation in a fresh process, so its peak memory is its own.

    python -m bench.probe --model DIR --length 1048576 [--samples 256] [--profile FILE.prof]

`DIR` holds `config.json` and `weights.pt` (written by `save_model`). Prints one JSON object: wall
seconds of `evaluate`, the process's resident memory before evaluating (torch imported, model
loaded) and its peak (VmHWM) after, accuracy and target mass.
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
from lengen_core.config import RunConfig
from lengen_core.evaluate import evaluate
from lengen_core.model import build_model


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the evaluation here")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, config = load_model(args.model)
    baseline = rss_bytes()
    profiler = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    report = evaluate(model, config, [args.length], samples=args.samples)[0]
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - start
    if profiler:
        profiler.dump_stats(args.profile)
    json.dump({"length": args.length, "samples": args.samples, "seconds": seconds, "baseline_rss_bytes": baseline,
               "peak_rss_bytes": peak_rss_bytes(), "accuracy": report.accuracy, "target_mass": report.target_mass,
               "threads": torch.get_num_threads()}, sys.stdout)


if __name__ == "__main__":
    main()

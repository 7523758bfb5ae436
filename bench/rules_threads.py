"""One inference rule's measurement at one torch thread and at two, in turn, on a run nothing ships for.

    .venv/bin/python -m bench.rules_threads                        # yarn and log-n, 6 rounds, the machine as it is
    .venv/bin/python -m bench.rules_threads --busy 2 --repeats 4   # with 2 busy processes holding the cores
    .venv/bin/python -m bench.rules_threads --out /tmp/threads.json

What the Dilution page (and a lesson's rules step off its shipped request) waits for when a person asks
for a rule: `ui.rules.runs.ruled_measurement`'s two calls, `measure(..., search=False)` under the rule at
the page's lengths up to `ui.analyses.RULE_LONGEST`, then the predicted horizon's search handed the
measurement's own predictions, both priced by lengen.budget as the server prices them. The run is trained
here (RoPE at the default width, `--steps` steps, `--seed`), so nothing shipped answers any of it.

The Streamlit server runs these at torch's default thread count (the cores: 2 on the shared machine); on a
CPU an evaluation also shares its chunks between that many worker threads (`cpu_workers`). Each round
times every rule at both counts, the order swapped every round so the two see the same load; the 1-minute
load average is recorded beside every figure. `--busy N` starts N processes that spin for the whole run
(the other work of a shared machine, made repeatable); they are stopped at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path

import torch

from lengen import budget
from lengen.presets import DILUTION_SAMPLES, RULE_LONGEST, dilution_lengths
from lengen_core.analysis.rules import parse_rule
from lengen_core.config import RunConfig, with_changes
from lengen_core.measure import measure, search_predicted_horizon
from lengen_core.training import train

THREADS = (1, 2)
DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice here, before this script sets any


def load() -> float:
    return os.getloadavg()[0]


def spin() -> None:
    while True:
        pass


def fresh_run(steps: int, seed: int, threads: int = 1):
    """RoPE at the default width, trained here (one thread: the training is not what is timed)."""
    torch.set_num_threads(threads)
    config = with_changes(RunConfig(), steps=steps, seed=seed, keep_training=True)
    return train(config, device="cpu")


def ruled(run, label: str, lengths: tuple[int, ...], samples: int):
    """`ui.rules.runs.ruled_measurement` without its caches: the measurement, then the horizon's search; with
    the seconds of each."""
    rule = parse_rule(label)
    start = time.perf_counter()
    m = measure(run, lengths, samples, rule, prices=budget, search=False)
    measured = time.perf_counter()
    horizon, note = search_predicted_horizon(run, rule, m.horizon_ceiling, None, budget,
                                             known={p.length: p.accuracy for p in m.predictions})
    parts = (measured - start, time.perf_counter() - measured)
    return dataclasses.replace(m, predicted_horizon=horizon, horizon_note=note), parts


def time_rounds(run, labels: list[str], repeats: int, samples: int) -> list[dict]:
    lengths = tuple(n for n in dilution_lengths(run.config) if n <= RULE_LONGEST)
    rows = []
    for round_ in range(repeats):
        for threads in THREADS if round_ % 2 == 0 else THREADS[::-1]:
            torch.set_num_threads(threads)
            for label in labels:
                before = load()
                start = time.perf_counter()
                m, (measuring, searching) = ruled(run, label, lengths, samples)
                seconds = time.perf_counter() - start
                horizon = None if m.predicted_horizon is None else m.predicted_horizon.text
                rows.append({"round": round_, "rule": label, "threads": threads, "seconds": round(seconds, 3),
                             "measure_seconds": round(measuring, 3), "search_seconds": round(searching, 3),
                             "load_before": round(before, 2), "load_after": round(load(), 2), "horizon": horizon})
                print(f"round {round_} {label:>6} threads {threads}: {seconds:6.2f} s (measure {measuring:.2f}, "
                      f"search {searching:.2f}; load {before:.2f} -> {load():.2f})", flush=True)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    table = []
    for label in dict.fromkeys(r["rule"] for r in rows):
        for threads in THREADS:
            times = [r["seconds"] for r in rows if r["rule"] == label and r["threads"] == threads]
            table.append({"rule": label, "threads": threads, "median": round(statistics.median(times), 2),
                          "max": round(max(times), 2), "min": round(min(times), 2), "runs": len(times)})
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", nargs="+", default=["yarn", "log-n"])
    parser.add_argument("--repeats", type=int, default=6, help="rounds; each times every rule at 1 and 2 threads")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--samples", type=int, default=DILUTION_SAMPLES)
    parser.add_argument("--busy", type=int, default=0, help="spinning processes to hold the cores meanwhile")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    start_load = os.getloadavg()
    started = time.perf_counter()
    run = fresh_run(args.steps, args.seed)
    print(f"trained {run.run_id} in {time.perf_counter() - started:.1f} s; load {start_load}", flush=True)
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for process in spinners:
        process.start()
    try:
        for threads in THREADS:  # first-call costs (imports, tables, thread pools) out of the figures
            torch.set_num_threads(threads)
            ruled(run, args.rules[0], (16,), args.samples)
        rows = time_rounds(run, args.rules, args.repeats, args.samples)
    finally:
        for process in spinners:
            process.terminate()
            process.join()
    table = summary(rows)
    print(f"\n{'rule':>8} {'threads':>7} {'median':>7} {'max':>7} {'min':>7}")
    for row in table:
        print(f"{row['rule']:>8} {row['threads']:>7} {row['median']:>7.2f} {row['max']:>7.2f} {row['min']:>7.2f}")
    result = {"run_id": run.run_id, "busy": args.busy, "cpu_count": os.cpu_count(),
              "torch_default_threads": DEFAULT_THREADS, "load_at_start": start_load,
              "load_at_end": os.getloadavg(), "summary": table, "rows": rows}
    print(f"load average at start {start_load}, at end {result['load_at_end']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

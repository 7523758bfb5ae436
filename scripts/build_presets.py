"""Train the preset runs and write them into `assets/presets/`: `python -m scripts.build_presets [--force]`;
then what their first visits compute (`--precompute`): the Start page's evaluations and the default
request of Dilution and Compare, measured by the function that measures a run trained in the app before it
is saved (lengen.first_visit), into
`assets/presets/precomputed/<run id>.json` (read by ui.runs instead of computing them again); and the
Theory page's optimisation experiment (C1, ui.theory.gradients): the constructed head's evaluations (in
`precomputed/<its run id>.json`) and its two trainings, traced (`precomputed/traces/<run id>-every<N>.json`,
read by lengen.presets.shipped_trace). `--sweep`: the Sweeps page's preset sweep (ui.sweep_panels.PRESET_GRID) into
`assets/presets/sweeps/<sweep id>/` (its cells, not its runs). `--delays`: only the Delays page's runs
(lengen.presets.DELAY_PRESETS: minimal heads of 64 wide, a few hundred kB in all) and its data-diversity sweep
(lengen.presets.DIVERSITY_GRID, its cells only). `--carriers`: only the stored carriers of the
presets' first-visit files, extracted again (the rest of each file kept as it is). `--rules`: only the measurements
under inference rules that the lessons' rules steps and the Dilution page's defaults ask of the single-head presets
(ui.rules.shipped), into `assets/presets/precomputed/rules/<run id>.json` (lengen.shipped_rules)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from lengen.first_visit import (
    FIRST_VISIT_CARRIER_SEARCH,
    allowed,
    carrier_to_dict,
    first_visit_data,
    to_dict,
)
from lengen.presets import (
    DELAY_PRESETS,
    DIVERSITY_GRID,
    OPTIMISATION_CONSTRUCTED,
    OPTIMISATION_TRACES,
    PRECOMPUTED,
    PRESET_ROOT,
    PRESETS,
    START_LENGTHS,
    START_SAMPLES,
    TRACE_LENGTHS,
    TRACE_ROWS,
    TRACE_SAMPLES,
    TRACES,
    trace_path,
)
from lengen.store import RunStore, preset_store
from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import ConfigError
from lengen_core.measure import Shipped
from lengen_core.models.initial import initial_model
from lengen_core.optimisation import trace_training
from lengen_core.training import train


def precompute(run_id: str) -> dict:
    """What a first visit to Start, Dilution and Compare asks of this preset: the default request measured
    as a run trained in the app is before it is saved (lengen.first_visit.first_visit: the
    evaluations, predictions, predicted horizon, law and carrier), and the Start page's evaluations."""
    run = preset_store().load(run_id)
    data = first_visit_data(run) or to_dict(Shipped())
    if run.config.single_head:
        data["evaluations"][str(START_SAMPLES)] = {
            str(n): dataclasses.asdict(evaluate(run.model, run.config, [n], samples=START_SAMPLES)[0])
            for n in allowed(run, START_LENGTHS)}
    return data


def refit(run_id: str) -> bool:
    """Only the law of a preset's precomputed file, fitted anew from the file's own evaluations and predictions
    (what `measure` does when a stored law is stale: lengen.first_visit.from_dict); True when
    the file changed. Cheap: no evaluation, prediction or horizon is computed again."""
    from lengen.first_visit import FIRST_VISIT_SAMPLES, from_dict, request_lengths
    from lengen_core.measure import measure

    path = PRECOMPUTED / f"{run_id}.json"
    data = json.loads(path.read_text())
    if data.get("fit") is None:
        return False
    shipped = from_dict(data)
    if shipped.fit is not None:  # up to date
        return False
    run = preset_store().load(run_id)
    m = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES, shipped=shipped)
    data["fit"] = {**dataclasses.asdict(m.fit), "samples": FIRST_VISIT_SAMPLES,
                   "lengths": sorted(n for n in m.lengths if n >= run.config.task.train_length)}
    path.write_text(json.dumps(data))
    return True


def refresh_carriers() -> None:
    """Each preset's stored carrier extracted again, the rest of its first-visit file unchanged."""
    for label, config in PRESETS.items():
        path = PRECOMPUTED / f"{config.run_id()}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        if "carrier" not in data:
            continue
        run = preset_store().load(config.run_id())
        data["carrier"] = carrier_to_dict(extract_carrier(run.model, run.config, search_length=FIRST_VISIT_CARRIER_SEARCH),
                                          FIRST_VISIT_CARRIER_SEARCH)
        path.write_text(json.dumps(data))
        print(f"{label}: carrier extracted again")


def precompute_rules() -> None:
    """Each single-head preset measured under the rules of every request of ui.rules.shipped, by the call the app
    makes for them (ui.runs.measurement: the preset's first-visit numbers handed in, this server's default
    budgets), shipped (lengen.shipped_rules)."""
    import time

    from lengen import budget
    from lengen.first_visit import from_dict
    from lengen.presets import precomputed
    from lengen.shipped_rules import request_key, ship_rules
    from lengen_core.analysis.rules import parse_rule
    from lengen_core.measure import measure
    from ui.rules.shipped import dilution_request, lesson_requests

    runs = {config.run_id(): preset_store().load(config.run_id()) for config in PRESETS.values() if config.single_head}
    requests = lesson_requests(runs)
    for run_id, run in runs.items():
        requests.setdefault(run_id, []).append(dilution_request(run))
    for run_id, asked in requests.items():
        run, shipped, done = runs[run_id], from_dict(precomputed(run_id)), {}
        for labels, lengths, samples in asked:
            for label in labels:
                key = request_key(label, lengths, samples)
                if key not in done:
                    start = time.perf_counter()
                    done[key] = measure(run, lengths, samples, parse_rule(label), shipped=shipped, prices=budget)
                    print(f"{run_id}: {key} in {time.perf_counter() - start:.1f}s", flush=True)
        print(f"{run_id}: {len(done)} measurements shipped in {ship_rules(run_id, done.values())}")


def precompute_optimisation() -> None:
    """The optimisation experiment's numbers (ui.theory.gradients), by the calls the page makes without them."""
    config = OPTIMISATION_CONSTRUCTED  # steps 0: its weights are the construction, nothing to train or store
    reports = evaluate(initial_model(config), config, list(START_LENGTHS), samples=START_SAMPLES)
    shipped = {"evaluations": {str(START_SAMPLES): {str(r.length): dataclasses.asdict(r) for r in reports}},
               "predictions": {}, "horizon": None}
    (PRECOMPUTED / f"{config.run_id()}.json").write_text(json.dumps(shipped))
    print(f"constructed head {config.run_id()}: precomputed")
    TRACES.mkdir(parents=True, exist_ok=True)
    for config, every in OPTIMISATION_TRACES:
        trace = trace_training(config, every, TRACE_LENGTHS, TRACE_SAMPLES)
        trace_path(config, every).write_text(json.dumps(trace.to_dict(rows=TRACE_ROWS)))
        print(f"trace of {config.run_id()} every {every} steps: {len(trace.losses)} steps")


def build_sweep(grid=None) -> None:
    """The Sweeps page's preset sweep (or `grid`: the Delays page's diversity sweep): run in a scratch store (the
    runs are not shipped), its folder copied into the presets; one worker per core."""
    import shutil
    import tempfile
    from pathlib import Path

    from lengen.sweep import run_sweep, sweep_dir
    from ui.sweep_panels import PRESET_GRID

    with tempfile.TemporaryDirectory() as scratch:
        result = run_sweep(grid or PRESET_GRID, Path(scratch))
        failed = [cell for cell in result.cells if "error" in cell]
        if failed:
            raise SystemExit(f"{len(failed)} cells of the preset sweep failed, e.g. {failed[0]['error']}")
        target = sweep_dir(PRESET_ROOT, result.sweep_id)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(sweep_dir(Path(scratch), result.sweep_id), target)
    print(f"preset sweep {result.sweep_id}: {len(result.cells)} cells in {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true", help="retrain presets that already exist")
    parser.add_argument("--precompute", action="store_true", help="only write what the first visits compute")
    parser.add_argument("--sweep", action="store_true", help="only rebuild the preset sweep (ui.sweep_panels.PRESET_GRID)")
    parser.add_argument("--first-visit", action="store_true",
                        help="with --precompute: only the presets' files, not the optimisation experiment's traces")
    parser.add_argument("--refit", action="store_true",
                        help="only fit the law anew in the precomputed files whose stored law is stale (no measuring)")
    parser.add_argument("--carriers", action="store_true", help="only extract the presets' stored carriers again")
    parser.add_argument("--rules", action="store_true",
                        help="only ship the measurements under inference rules of the lessons and the Dilution page's defaults")
    parser.add_argument("--absolute", action="store_true",
                        help="only ship the transformer presets' absolute-position analysis (the Transformer page's section)")
    parser.add_argument("--delays", action="store_true", help="only train the Delays page's runs (lengen.presets.DELAY_PRESETS)")
    args = parser.parse_args()
    if args.absolute:
        build_absolute()
        return
    if args.rules:
        precompute_rules()
        return
    if args.carriers:
        refresh_carriers()
    if args.refit:
        for label, config in PRESETS.items():
            if (PRECOMPUTED / f"{config.run_id()}.json").exists() and refit(config.run_id()):
                print(f"{label}: law fitted anew")
    if args.carriers or args.refit:
        return
    if args.sweep:
        build_sweep()
        return
    if args.precompute:
        PRECOMPUTED.mkdir(parents=True, exist_ok=True)
        for label, config in PRESETS.items():
            (PRECOMPUTED / f"{config.run_id()}.json").write_text(json.dumps(precompute(config.run_id())))
            print(f"{label}: precomputed")
        if not args.first_visit:
            precompute_optimisation()
        return
    if args.delays:
        build_sweep(DIVERSITY_GRID)
    store = RunStore(root=PRESET_ROOT)
    for label, config in (DELAY_PRESETS if args.delays else {**PRESETS, **DELAY_PRESETS}).items():
        run_id = config.run_id()
        if store.exists(run_id) and not args.force:
            print(f"{label}: {run_id} already built")
            continue
        if store.exists(run_id):
            store.delete(run_id)
        run = train(config, device="cpu")  # CPU: the same weights on every machine that rebuilds them
        store.save(run)  # a table shared by several layers is written once (the store's own dedup)
        print(f"{label}: {run_id} trained in {run.train_seconds:.1f}s, {run.steps} steps, "
              f"train accuracy {run.train_accuracy:.3f}")


def build_absolute() -> None:
    """The Transformer page's absolute-position analysis of each transformer preset, at each probe length the
    run allows, with the default samples: what its first visit would compute (lengen.shipped_absolute)."""
    from lengen.shipped_absolute import ship_absolute
    from lengen_core.analysis.absolute import PROBE_SAMPLES, analyse_absolute_position
    from ui.transformer.absolute import PROBE_MULTIPLES

    store = RunStore(root=PRESET_ROOT)
    for label, config in PRESETS.items():
        if config.single_head:
            continue
        run = store.load(config.run_id())
        results = {}
        for multiple in PROBE_MULTIPLES:
            length = multiple * config.task.train_length
            try:
                results[length] = analyse_absolute_position(run.model, run.config, PROBE_SAMPLES, length)
            except (ConfigError, ValueError) as error:  # a length past a learned table's end
                print(f"{label}: not at {length}: {error}")
        print(f"{label}: shipped at {sorted(results)} in {ship_absolute(run.run_id, results)}")


if __name__ == "__main__":
    main()

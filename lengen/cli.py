"""Command line: `python -m lengen train|construct|continue|evaluate|transfer|carrier|heads|absolute|sweep|runs|
delete`.

Results go to stdout (JSON under `--json`, a short readable summary otherwise). Runs are read from
the person's store (`$LENGEN_HOME`) and then from the presets shipped with the lab, a read-only
store (`lengen.store.preset_store`), so a run id the app shows opens here too. Bad input gives one
line on stderr and exit status 2, never a traceback. This module writes to the streams it is
given, so it stays testable and the rest of the core never prints.

Every command that computes takes `--device` (auto by default: CUDA, then MPS, then the CPU,
`lengen_core.training.resolve_device`): `train`, `construct` and `continue` train there; `evaluate`,
`carrier` and `heads` load the stored run onto it and compute there. `evaluate --rule NAME
[--rule-param X]` reads the run under an inference rule (lengen_core.analysis.rules), each row saying which;
its numbers are lengen_core.measure's, as the app's Dilution and Compare pages and a sweep's cells give
them for the same lengths, samples and rule. Each answer's `device` says
which device that was (for a training, the device the run was trained on, also when a stored run
is reused), and `device_name` says it in words (the GPU's name on CUDA).

A run of a delay task (delay-copy, selective-copy) is evaluated at its training length against the
delay instead: `evaluate RUN --delays 9-30` (default every delay the context holds), each delay
marked seen or unseen (lengen_core.analysis.delays); `transfer` measures how training on delays A
first changes how fast a run's own delays are learned (lengen_core.transfer).

At a person's own terminal the budgets do not refuse: each command prints its estimate on stderr and
runs, with progress for anything that takes a while (lengen.console); `--budget`, or a
budget variable set in the environment, applies the server's limits. Ctrl-C stops a command with
status 130: what it finished is kept (a stored run, a sweep's cells), and no `.tmp-*` folder is left.
`evaluate` computes what was asked: the evaluation at the lengths, and the prediction from the weights
(`--predict`) and the predicted horizon's search (`--horizon`) only when asked, or where the run was
stored with them (measured once when the app trained it, or shipped with a preset), read from there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO, get_args

from lengen_core.analysis.absolute import (
    PROBE_BASELINE_SEEDS,
    PROBE_SAMPLES,
    AbsolutePosition,
    analyse_absolute_position,
    probe_finding,
    sink_length_of,
)
from lengen_core.analysis.carrier import ALIGNMENT_MARGIN, extract_carrier
from lengen_core.analysis.delays import DELAY_SAMPLES, DELAY_SEED, delay_curve
from lengen_core.analysis.evaluate import LengthReport, doublings
from lengen_core.analysis.fit import NOT_ASKED
from lengen_core.analysis.heads import analyse_heads
from lengen_core.analysis.mask import mask_share
from lengen_core.analysis.rules import RULES, rule_with_parameter
from lengen_core.config import (
    DELAY_TASKS,
    SETTINGS,
    ConfigError,
    DeviceName,
    RunConfig,
    Setting,
    with_changes,
)
from lengen_core.measure import (
    NOT_SEARCHED,
    check_measurement,
    measure,
    search_ceiling,
    search_predicted_horizon,
    shipped_horizon,
)
from lengen_core.models.encodings import LengthError
from lengen.budget import BudgetError, duration
from lengen.console import BUDGET_FLAG, Console
from lengen.first_visit import (
    FIRST_VISIT_LONGEST,
    FIRST_VISIT_SAMPLES,
    from_dict,
    measured_on_save,
    save_run,
)
from lengen.lineage import continuation, starting_weights
from lengen.runtime import deterministic_cublas, device_name, limit_heap_growth
from lengen.store import RunStore, StoreError, preset_store
from lengen.sweep import (
    AXES,
    NOT_RUN,
    SweepGrid,
    collapse_summary,
    grid_from_toml,
    run_sweep,
    sweep_seconds,
)
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import Training, resolve_device
from lengen_core.transfer import TRANSFER_PATIENCE, transfer

USER_ERRORS = (ConfigError, LengthError, StoreError, ValueError)
INTERRUPTED = 130  # the shell's status for a command stopped by Ctrl-C (128 + SIGINT)
DEVICE_HELP = "auto: CUDA, then MPS, then CPU (default auto)"
BUDGET_HELP = ("refuse work over the server's budgets (LENGEN_REQUEST_MEMORY_MB, LENGEN_REQUEST_SECONDS, "
               "LENGEN_TRAIN_SECONDS; setting one of them does the same); by default a command prints its "
               "estimate and runs")


class UsageError(Exception):
    pass


class Interrupted(Exception):
    """Ctrl-C, with what was kept: the command ends with status 130."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise UsageError(message)


def _lengths(text: str) -> list[int]:
    try:
        lengths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"lengths must be whole numbers separated by commas, got {text!r}") from None
    if not lengths:
        raise argparse.ArgumentTypeError("give at least one length, e.g. --lengths 16,64,1024")
    return lengths


def _listed(kind: type, separator: str = ","):
    words = "commas" if separator == "," else f"'{separator}'"

    def parse(text: str) -> list:
        try:
            values = [kind(part.strip()) for part in text.split(separator) if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__} values separated by {words}, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError("give at least one value")
        return values

    return parse


def build_parser() -> Parser:
    parser = Parser(prog="python -m lengen", description="lengen: length generalisation in attention")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument(BUDGET_FLAG, action="store_true", help=BUDGET_HELP)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    json_flag = Parser(add_help=False)  # --json and --budget also accepted after the command
    json_flag.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON on stdout")
    json_flag.add_argument(BUDGET_FLAG, action="store_true", default=argparse.SUPPRESS, help=BUDGET_HELP)

    t = commands.add_parser("train", parents=[json_flag], help="train a run (or reuse the stored one with the same config)")
    _add_training_flags(t, SETTINGS)
    k = commands.add_parser("construct", parents=[json_flag],
                            help="the learned-position head built to implement the relative rule (init constructed), "
                                 "stored as a run; steps 0 unless given (then trained on from the construction)")
    _add_training_flags(k, {name: setting for name, setting in SETTINGS.items() if name != "init"},
                        {"steps": 0, "encoding": "learned"})

    k = commands.add_parser("continue", parents=[json_flag],
                            help="train a stored run further, as a new run that records the run it continues")
    k.add_argument("run_id")
    k.add_argument("--steps", type=int, default=None, help="more steps (default: as many as the run was given)")
    _add_device_flag(k, "as for train")
    k.add_argument("--retrain", action="store_true", help="train even if that continuation is stored already")

    e = commands.add_parser("evaluate", parents=[json_flag], help="accuracy, target mass and fitted law at lengths; the prediction and the horizon when asked")
    e.add_argument("run_id")
    e.add_argument("--lengths", type=_lengths, default=None, help="comma separated, default 1×…64× training")
    e.add_argument("--samples", type=int, default=DELAY_SAMPLES,
                   help=f"sequences per length, or per delay (default {DELAY_SAMPLES})")
    e.add_argument("--seed", type=int, default=DELAY_SEED, help="seed of the evaluation sequences")
    e.add_argument("--delays", type=str, default=None, metavar="SPEC",
                   help="a delay task's run: accuracy against the delay at the training length, e.g. 9-30 or 2,4,8 "
                        "(default every delay the context holds)")
    e.add_argument("--rule", choices=tuple(RULES), default="none",
                   help="the inference rule to read the run under, no retraining: " + "; ".join(
                       f"{name}: {rule.summary}" for name, rule in RULES.items()) + " (default none)")
    e.add_argument("--rule-param", default="", metavar="X",
                   help="the rule's parameter: ssmax's s (default 1/ln L_train); the scale of yarn, pi, ntk and "
                        "ntk-by-parts (default L/L_train at each length); dynamic's factor f (default 2); longrope's "
                        "table of D/2 factors, as '1x32/2/4x31' (factors joined by '/'; 4x31 is the factor 4, 31 times)")
    e.add_argument("--predict", action="store_true",
                   help="also predict each length from the weights (and fit the law through it), unless the run "
                        "was stored with those predictions")
    e.add_argument("--horizon", action="store_true",
                   help="also search the predicted horizon, unless the run was stored with it")
    _add_device_flag(e)

    x = commands.add_parser("transfer", parents=[json_flag],
                            help="a delay task: steps to learn a run's delays B after training on delays A, against "
                                 "from scratch")
    _add_training_flags(x, {name: setting for name, setting in SETTINGS.items()
                            if name not in ("init", "continues", "patience", "target_accuracy", "keep_training")})
    x.add_argument("--before", type=str, required=True, metavar="SPEC", help="delays A trained on first, e.g. 2-4")
    x.add_argument("--pretrain-steps", type=int, default=None, help="steps on A (default: --steps)")
    x.add_argument("--patience", type=int, default=TRANSFER_PATIENCE,
                   help=f"steps the batch accuracy must hold ≥ {ACCURACY_BAR:g} to count as learned "
                        f"(default {TRANSFER_PATIENCE})")
    c = commands.add_parser("carrier", parents=[json_flag], help="the carrier kernel of a run")
    c.add_argument("run_id")
    c.add_argument("--search-length", type=int, default=1 << 20, help="how far to look for near-recurrences")
    _add_device_flag(c)

    h = commands.add_parser("heads", parents=[json_flag], help="per-head carriers: carrier heads, pinned heads")
    h.add_argument("run_id")
    _add_device_flag(h)

    a = commands.add_parser("absolute", parents=[json_flag],
                            help="where absolute position comes from: the sink, a position probe against untrained "
                                 "seeds, the interventions, the softmax denominators (a transformer run)")
    a.add_argument("run_id")
    a.add_argument("--length", type=int, default=None, help="the probe's sequence length (default: the training length)")
    a.add_argument("--samples", type=int, default=PROBE_SAMPLES, help=f"sequences (default {PROBE_SAMPLES})")
    _add_device_flag(a)

    w = commands.add_parser("sweep", parents=[json_flag],
                            help="train (or reuse) and measure a grid of runs; one table, the data collapse")
    w.add_argument("--grid", type=str, default=None,
                   help="a TOML file with the grid (keys as these options, with underscores; a [base] table "
                        "for other settings); options given here override it")
    for axis in AXES:  # --vocabs, the older spelling of --vocab-sizes, still works
        w.add_argument(axis.flag, *(f"--{alias}" for alias in axis.aliases), dest=axis.field,
                       type=_listed(axis.kind, axis.separator), default=None,
                       help=f"{'comma' if axis.separator == ',' else repr(axis.separator)} separated, e.g. "
                            f"{axis.example}{axis.note and '; ' + axis.note}")
    w.add_argument("--lengths", type=_listed(int), default=None, help="comma separated, e.g. 16,64,256,1024")
    w.add_argument("--samples", type=int, default=None, help="sequences per length (default 512)")
    w.add_argument("--set", dest="base", action="append", default=[], metavar="NAME=VALUE",
                   help="another setting for every cell, by its config name (e.g. --set steps=600); repeatable")
    w.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local: a process pool on this machine (default); ray: Ray tasks")
    w.add_argument("--address", default=None, help="ray: an existing cluster's address (host:port); none: a local Ray")
    w.add_argument("--workers", type=int, default=None, help="local: worker processes (default: the cores)")
    w.add_argument("--device", default="cpu", choices=get_args(DeviceName), help="where each cell computes (default cpu)")

    commands.add_parser("runs", parents=[json_flag], help="list stored runs")
    d = commands.add_parser("delete", parents=[json_flag], help="delete a stored run")
    d.add_argument("run_id")
    return parser


def _add_training_flags(parser: Parser, settings: dict[str, Setting], defaults: dict[str, Any] | None = None) -> None:
    """Every setting of a run as a flag, with the config's own bounds and choices, and the training options."""
    for setting in settings.values():
        if setting.kind is bool:
            parser.add_argument(f"--{setting.flag}", dest=setting.name, action="store_true",
                                help=f"{setting.label} (off by default)")
            continue
        default = (defaults or {}).get(setting.name, setting.default)
        bounds = f"; {setting.low:g} to {setting.high:g}" if setting.low is not None else ""
        parser.add_argument(f"--{setting.flag}", dest=setting.name, type=setting.kind, default=default,
                            choices=setting.choices or None, help=f"{setting.label}, default {default}{bounds}")
    _add_device_flag(parser, "train on it; " + DEVICE_HELP)
    parser.add_argument("--retrain", action="store_true", help="train even if the run is stored already")


def _add_device_flag(parser: Parser, help: str = "load the run onto it and compute there; " + DEVICE_HELP) -> None:
    parser.add_argument("--device", default="auto", choices=get_args(DeviceName), help=help)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    return with_changes(RunConfig(), **{name: getattr(args, name) for name in SETTINGS if hasattr(args, name)})


def _load(run_id: str, store: RunStore, device: str = "cpu") -> Any:
    """The run from the person's store, else from the presets shipped with the lab, on `device`
    (a name `resolve_device` takes; an unavailable one is a user error before the run is read)."""
    target = str(resolve_device(device))
    presets = preset_store()
    run = presets.load(run_id, target) if not store.exists(run_id) and presets.exists(run_id) else store.load(run_id, target)
    return run


def _device(run) -> dict[str, str]:
    """Where an analysis ran: the device the run was loaded onto, in words too, and where it was trained."""
    return {"device": run.device, "device_name": device_name(run.device), "trained_on": run.training_device}


def command_train(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    return _trained(config_from_args(args), args, store)


def command_continue(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    """Train a stored run further, as a new run that records which run it continues."""
    return _trained(continuation(_load(args.run_id, store).config, args.steps), args, store)


def _trained(config: RunConfig, args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    run = None if args.retrain else store.find(config) or preset_store().find(config)
    reused = run is not None
    if run is None:
        console: Console = args.console
        console.pricer().check_training(config)  # the estimate, said first; refused only under --budget
        console.estimate()
        store.check_can_save(config)  # a read-only, full or over-quota store is found before training
        run = _train(config, args.device, starting_weights(config, store), console)
        if measured_on_save(config):  # saved first, then measured in this process: the app opens it at once
            console.say(f"lengen: saving it, then measuring it at the pages' default request ({FIRST_VISIT_SAMPLES} sequences "
                        f"per length up to {FIRST_VISIT_LONGEST:,}), so the app opens it without measuring")
        save_run(store, run, replace=args.retrain)
    return {
        "run_id": run.run_id,
        "config": config.to_dict(),
        "device": run.training_device,  # where it was trained, also for a stored run loaded here
        # in words where it was trained here; a reused run's GPU may not be this machine's
        "device_name": run.training_device if reused else device_name(run.training_device),
        "steps": run.steps,
        "train_seconds": run.train_seconds,
        "loss": run.loss,
        "train_accuracy": run.train_accuracy,
        "stopped_early": run.stopped_early,
        "reused": reused,
        "verdict": run.verdict.to_dict(),
    }


def _train(config: RunConfig, device: str, start, console: Console):
    """lengen_core.training's steps with a bar counting them (it stops early when the target is reached)."""
    training = Training(config, device, start)
    bar = None
    try:
        for progress in training:
            bar = bar or console.steps("training", config.train.steps, "steps")
            if bar is not None:
                if progress.finished and progress.step < bar.total:  # stopped early: the bar ends where it did, full
                    bar.total = progress.step
                    bar.set_description(f"training (stopped early at step {progress.step:,} of {config.train.steps:,})",
                                        refresh=False)
                bar.update(progress.step - bar.n)
                bar.set_postfix(loss=f"{progress.loss:.3f}", accuracy=f"{progress.accuracy:.2f}", refresh=False)
        console.say()  # no step to count (0 steps: the construction itself)
        return training.finish()
    finally:
        if bar is not None:
            bar.close()


def command_construct(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    """`train` with init constructed: the construction itself (steps 0), or trained on from it."""
    args.init = "constructed"
    return command_train(args, store)


def _row(report, prediction, fitted: float | None, train_length: int, rule: str) -> dict[str, Any]:
    """One length of `evaluate --json`: the report's fields (a transformer's accuracy by position as
    pairs), the prediction from the weights and the fitted law's p there (None where there is none)."""
    row = {key: value for key, value in vars(report).items() if key not in ("positions", "accuracy_by_position")}
    if isinstance(report, LengthReport):
        row["accuracy_beyond"] = report.accuracy if report.length > train_length else None
    else:
        row["rule"] = rule
        row["accuracy_by_position"] = [{"position": int(p), "accuracy": float(a)}
                                       for p, a in zip(report.positions, report.accuracy_by_position)]
    return {**row,
            "predicted_accuracy": None if prediction is None else prediction.accuracy,
            "predicted_vote_accuracy": None if prediction is None else prediction.vote_accuracy,
            "predicted_target_mass": None if prediction is None else prediction.target_mass,
            "fitted_target_mass": fitted}


def command_evaluate(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    """The run measured (lengen_core.measure) at the lengths asked, default 1×…64× training (1×…16× by
    forward passes), written out as it is."""
    rule = rule_with_parameter(args.rule, args.rule_param)
    run = _load(args.run_id, store, args.device)
    config = run.config
    if config.task.task in DELAY_TASKS or args.delays is not None:
        return _evaluate_delays(run, args)
    L = config.task.train_length
    lengths = args.lengths or list(doublings(L, 7 if config.single_head else 5))
    console: Console = args.console
    pricer = console.pricer()
    shipped = _stored_measurement(args.run_id, store)
    # refused before any work; what is stored or not asked for is not priced
    check_measurement(run, lengths, args.samples, rule, args.seed, shipped, pricer, args.predict)
    ceiling = search_ceiling(run, lengths, rule) if config.single_head else None
    search_seconds = 0.0  # the horizon search's share of the estimate: it has a bar of its own
    searched = config.single_head and args.horizon and shipped_horizon(shipped, rule, ceiling) is None
    if searched:  # priced only where it will be searched
        try:
            search_seconds = pricer.check_horizon(config, ceiling, rule).seconds
        except BudgetError:
            pass  # the search is left out with a note; the rest is answered
    seconds = console.estimate()
    with console.counted("evaluating", seconds - search_seconds, "keys", unit_scale=True) as progress:
        m = measure(run, lengths, args.samples, rule, args.seed, shipped=shipped, prices=pricer,
                    predict=args.predict, search=args.horizon and not searched, progress=progress)
    if searched:
        with console.estimated("searching the predicted horizon", search_seconds):
            horizon, note = search_predicted_horizon(run, rule, ceiling, shipped, pricer)
        m = dataclasses.replace(m, predicted_horizon=horizon, horizon_note=note)
    predictions = m.predictions or [None] * len(m.lengths)
    rows = [_row(report, prediction, fitted, L, m.rule)
            for report, prediction, fitted in zip(m.reports, predictions, m.fitted_masses, strict=True)]
    fit = m.fit.fit
    fitted = None if fit is None else fit.to_dict()
    measured, predicted = m.measured_horizon, m.predicted_horizon
    return {"run_id": run.run_id, "rule": m.rule, "task": config.task.task, "chance": 1 / config.task.vocab_size,
            "verdict": run.verdict.to_dict(), "lengths": rows, "fit": fitted, "fit_status": m.fit.status,
            "fit_reason": f"{m.fit.reason[:-1]}: --predict makes it" if m.fit is NOT_ASKED else m.fit.reason,
            "horizon_accuracy": ACCURACY_BAR,
            "predicted_horizon": None if predicted is None else predicted.length,
            "predicted_horizon_below": None if predicted is None else predicted.below,
            "predicted_horizon_ceiling": m.horizon_ceiling, "predicted_horizon_note": m.horizon_note,
            "predicted_horizon_reason": (f"{m.horizon_reason}; --horizon searches it" if m.horizon_note == NOT_SEARCHED
                                         else m.horizon_reason),
            "prediction_status": None if m.prediction_status is None else m.prediction_status.status,
            "prediction_status_reason": None if m.prediction_status is None else m.prediction_status.reason,
            "measured_horizon": None if measured is None else measured.length,
            "measured_horizon_below": None if measured is None else measured.below,
            # as the app words them (Horizon.text), for the readable output
            "measured_horizon_text": None if measured is None else measured.text,
            "predicted_horizon_text": None if predicted is None else predicted.text, **_device(run)}


def _evaluate_delays(run, args: argparse.Namespace) -> dict[str, Any]:
    """A delay task's run against the delay (lengen_core.analysis.delays); the length options do not apply."""
    config = run.config
    if config.task.task not in DELAY_TASKS:
        raise ConfigError(f"--delays reads a run of the {' or '.join(DELAY_TASKS)} task; {run.run_id} is on the "
                          f"{config.task.task} task: use --lengths")
    if args.lengths is not None or args.rule != "none" or args.predict or args.horizon:
        raise ConfigError("a delay task's run is evaluated at its training length against the delay: --lengths, "
                          "--rule, --predict and --horizon do not apply (use --delays)")
    curve = delay_curve(run.model, config, args.delays, args.samples, args.seed)
    return {"run_id": run.run_id, "task": config.task.task, "verdict": run.verdict.to_dict(), **curve.to_dict(),
            **_device(run)}


def command_transfer(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    """Steps to learn the configured run's delays after `--before` delays, against from scratch (trains
    three runs in memory; none is stored)."""
    config = config_from_args(args)
    pricer = args.console.pricer()
    for priced in (with_changes(config, delays=args.before, steps=args.pretrain_steps or config.train.steps),
                   config, config):
        pricer.check_training(priced)
    args.console.estimate()
    result = transfer(config, args.before, args.pretrain_steps, args.device, args.patience)
    return {"run_config": config.to_dict(), **result.to_dict()}


def _stored_measurement(run_id: str, store: RunStore):
    """What the run was stored with (lengen.first_visit), from the person's store or the presets;
    `measure` takes a piece of it only where it answers exactly the question asked."""
    source = store if store.exists(run_id) else preset_store()
    try:
        return from_dict(source.first_visit(run_id))
    except (KeyError, TypeError, ValueError):  # written by another version: measured afresh
        return None


def command_heads(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    run = _load(args.run_id, store, args.device)
    console: Console = args.console
    console.pricer().check_head_analysis(run.config)
    with console.estimated("analysing the heads", console.estimate()):
        found = analyse_heads(run.model, run.config)
    heads = [
        {**{key: value for key, value in vars(h).items() if key != "carrier"},
         "carrier": [float(v) for v in h.carrier]}
        for h in found
    ]
    return {"run_id": run.run_id, "heads": heads,
            "carrier_heads": [[h["layer"], h["head"]] for h in heads if h["is_carrier"]],
            "pinned_heads": [[h["layer"], h["head"]] for h in heads if h["pinned_key"] is not None],
            **_device(run)}


def command_absolute(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    run = _load(args.run_id, store, args.device)
    length = args.length or run.config.task.train_length
    console: Console = args.console
    if run.config.model.minimal:  # no residual stream to probe: the mask's share alone, exact for RoPE
        sink_length = sink_length_of(run.config)
        console.pricer().check_mask_share(run.config, sink_length, args.samples)
        with console.estimated("reading the denominators", console.estimate()):
            share = mask_share(run.model, run.config, sink_length, args.samples)
        positions = sorted({0, 1, run.config.task.train_length - 1, sink_length - 1})
        return {"run_id": run.run_id, "sink_length": sink_length, "samples": args.samples,
                "log_denominator": {t: float(share.measured[0, 0, t]) for t in positions},
                "exact_log_denominator": None if share.exact is None else {t: float(share.exact[0, t]) for t in positions},
                "note": "the minimal head has no residual stream: no probe, no sink, no interventions", **_device(run)}
    console.pricer().check_absolute_position(run.config, length, args.samples)
    with console.counted("probing absolute position", console.estimate(), "models") as progress:
        done, total = iter(range(1, PROBE_BASELINE_SEEDS + 5)), PROBE_BASELINE_SEEDS + 4
        found = analyse_absolute_position(run.model, run.config, args.samples, length,
                                          each=None if progress is None else lambda: progress(next(done), total))
    return {"run_id": run.run_id, **_absolute(found), **_device(run)}


def _absolute(found: AbsolutePosition) -> dict[str, Any]:
    """The JSON of a position probe: the probe per layer with its untrained range, the interventions, and per
    head the mean sink weight and ln Z_t at a few query positions."""
    probe, positions = found.probe, sorted({0, 1, found.length - 1, found.sink_length - 1})
    heads = [{"layer": layer, "head": head, "sink": {t: float(found.sink[layer, head, t]) for t in positions},
              "log_denominator": None if found.log_denominator is None else
              {t: float(found.log_denominator[layer, head, t]) for t in positions},
              "exact_log_denominator": None if found.exact_log_denominator is None or layer > 0 else
              {t: float(found.exact_log_denominator[head, t]) for t in positions}}
             for layer in range(found.sink.shape[0]) for head in range(found.sink.shape[1])]
    return {"length": found.length, "samples": found.samples, "sink_length": found.sink_length,
            "probe": {"r2": list(probe.r2), "untrained_low": list(probe.baseline_low),
                      "untrained_high": list(probe.baseline_high), "untrained_seeds": list(probe.seeds),
                      "margin": probe.margin, "beats": [None, *probe.beats], "finding": probe_finding(probe)},
            "interventions": [{"name": v.name, "accuracy": v.accuracy, "r2": list(v.r2), "reason": v.reason}
                              for v in found.variants],
            "heads": heads}


def _absolute_lines(result: dict[str, Any]) -> str:
    probe = result["probe"]
    lines = [(f"position probe at length {result['length']} ({result['samples']} sequences), held-out R² by layer "
              "(0: embeddings), untrained range in brackets:")]
    lines += [f"  layer {i}: {r:.3f} [{low:.3f} to {high:.3f}]"
              + ("  (the embeddings, not part of the claim)" if beat is None else "  beats" if beat else "")
              for i, (r, low, high, beat) in enumerate(zip(probe["r2"], probe["untrained_low"],
                                                            probe["untrained_high"], probe["beats"], strict=True))]
    lines.append(probe["finding"][:1].upper() + probe["finding"][1:])
    for v in result["interventions"]:
        lines.append(f"{v['name']}: " + (v["reason"] if v["accuracy"] is None else
                                         f"accuracy {v['accuracy']:.3f}, R² " + ", ".join(f"{r:.3f}" for r in v["r2"])))
    for h in result["heads"]:
        sink = ", ".join(f"t={t} {w:.3f}" for t, w in h["sink"].items())
        lines.append(f"layer {h['layer']} head {h['head']}: weight on key 0 {sink}")
    return "\n".join(lines)


def command_carrier(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    run = _load(args.run_id, store, args.device)
    console: Console = args.console
    console.pricer().check_carrier(run.config, args.search_length)  # said first; refused only under --budget
    seconds = console.estimate()
    with console.counted("extracting the carrier", seconds, "parts") as progress:
        carrier = extract_carrier(run.model, run.config, search_length=args.search_length, progress=progress)
    return {
        "run_id": run.run_id,
        "verdict": run.verdict.to_dict(),
        "source": carrier.source,
        "offset": carrier.offset,
        "alignment_margin_needed": ALIGNMENT_MARGIN,
        **_carrier_metrics(carrier.metrics),
        "baseline": _carrier_metrics(carrier.baseline),
        # every metric is exact (from the weights, no sampling): the interval a difference must leave is the
        # baseline's spread over untrained initialisations of the same config, not a sampling error
        "metrics_exact": True,
        "baseline_range": {name: list(value) if isinstance(value, tuple) else value
                           for name, value in dataclasses.asdict(carrier.baseline_range).items()},
        "spectrum": [{"frequency": float(w), "amplitude": float(a)}
                     for w, a in zip(carrier.frequencies, carrier.amplitudes)],
        "carrier": [float(v) for v in carrier.values[: 4 * carrier.train_length]],
        "singular_values": [float(s) for s in carrier.singular_values[:32]],
        "near_recurrences": [vars(r) for r in carrier.near_recurrences],
        **_device(run),
    }


def _carrier_metrics(metrics) -> dict[str, Any]:
    """The metric names of the command line (alignment for `aligned`), trained and baseline alike."""
    values = vars(metrics).copy()
    values["alignment"] = values.pop("aligned")
    return values


def command_runs(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    presets = preset_store()
    runs = [
        {"run_id": s.run_id, "preset": source is presets, "encoding": s.config.model.encoding,
         "attention": s.config.model.attention, "task": s.config.task.task, "layers": s.config.model.n_layers,
         "heads": s.config.model.n_heads, "offset": s.config.task.offset, "train_length": s.config.task.train_length,
         "seed": s.config.train.seed, "steps": s.steps, "train_accuracy": s.train_accuracy,
         "created": s.created.isoformat(), "verdict": None if s.verdict is None else s.verdict.to_dict()}
        for source in (store, presets) for s in source.list_runs()
        if source is store or not store.exists(s.run_id)
    ]
    return {"root": str(store.root), "preset_root": str(presets.root), "runs": runs, "corrupt": store.corrupt_runs()}


def command_delete(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    if not store.exists(args.run_id) and preset_store().exists(args.run_id):
        preset_store().delete(args.run_id)  # refuses: the presets are read-only
    store.delete(args.run_id)
    return {"deleted": args.run_id}


def command_sweep(args: argparse.Namespace, store: RunStore) -> dict[str, Any]:
    data = grid_from_toml(args.grid) if args.grid else {}
    for key in (*(axis.field for axis in AXES), "lengths", "samples"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    base = dict(data.pop("base", {}))
    for item in args.base:
        name, equals, value = item.partition("=")
        if not equals or name not in SETTINGS:
            raise ConfigError(f"--set {item!r}: give NAME=VALUE with a config setting's name "
                              f"({', '.join(sorted(SETTINGS))})")
        base[name] = SETTINGS[name].kind(value) if SETTINGS[name].kind is not bool else value.lower() in ("1", "true")
    grid = SweepGrid(**{key: tuple(value) if isinstance(value, list) else value for key, value in data.items()},
                     base=tuple(base.items()))
    console: Console = args.console
    console.pending = (f"lengen: estimate: this sweep of {grid.size} cells: about {duration(sweep_seconds(grid))} of "
                       "work on one worker (cells done before are reused); "
                       + ("this server's budgets apply to each cell" if console.limited else
                          f"no limit at a terminal ({BUDGET_FLAG} applies the server's)"))
    bar = console.steps("sweep", grid.size, "cells")

    def advanced(progress) -> None:
        if bar is not None:
            bar.update(progress.done - bar.n)
            bar.set_postfix(errors=progress.errors, refresh=False)

    try:
        result = run_sweep(grid, store.root, backend=args.backend, workers=args.workers, address=args.address,
                           device=args.device, progress=advanced, limited=console.limited)
    except KeyboardInterrupt:  # before any cell ran (the pool's start, say)
        raise Interrupted("the sweep was interrupted (Ctrl-C); every cell finished is kept: run the same command "
                          "again to resume") from None
    finally:
        if bar is not None:
            bar.close()
    if result.cancelled:  # Ctrl-C while cells run: it stopped them and returned
        left = sum(cell.get("error") == NOT_RUN for cell in result.cells)
        raise Interrupted(f"the sweep was interrupted (Ctrl-C): {len(result.cells) - left} of {len(result.cells)} "
                          f"cells are done and kept in {result.directory}; run the same command again to run the "
                          f"other {left}")
    return {"sweep_id": result.sweep_id, "backend": result.backend, "cells": result.cells, "ran": result.ran,
            "trained": result.trained, "collapse": collapse_summary(result.cells),
            "table": str(result.csv_path), "parquet": str(result.parquet_path)}


COMMANDS = {
    "train": command_train,
    "construct": command_construct,
    "continue": command_continue,
    "evaluate": command_evaluate,
    "transfer": command_transfer,
    "carrier": command_carrier,
    "heads": command_heads,
    "runs": command_runs,
    "delete": command_delete,
    "sweep": command_sweep,
    "absolute": command_absolute,
}


def _finite(value: Any) -> Any:
    """JSON has no infinities or NaN: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _head_line(head: dict[str, Any]) -> str:
    line = (f"layer {head['layer']} head {head['head']}: argmax offset {head['argmax_offset']}, "
            f"Toeplitz {head['toeplitz_fraction']:.3f}, rank {head['effective_rank']}, "
            f"weight on k {head['target_weight']:.3f}")
    if head["is_carrier"]:
        line += "  carrier"
    if head["pinned_key"] is not None:
        line += f"  pinned at key {head['pinned_key']}"
    return line


def _delay_summary(result: dict[str, Any]) -> str:
    lines = [f"{'delay':>6} {'seen':>5} {'accuracy':>9} {'95% interval':>14} {'source mass':>12} {'margin':>7}"]
    lines += [f"{p['delay']:>6} {'yes' if p['seen'] else 'no':>5} {p['accuracy']:>9.3f} "
              f"{p['accuracy_low']:>6.3f}–{p['accuracy_high']:<7.3f} {p['source_mass']:>12.3f} {p['source_margin']:>7.2f}"
              for p in result["points"]]
    mean = lambda value: "—" if value is None else f"{value:.3f}"
    lines.append(f"mean accuracy: seen {mean(result['mean_seen'])}, unseen {mean(result['mean_unseen'])} "
                 f"(chance {result['chance']:.3f}; {result['samples']} sequences a delay at length {result['length']}; "
                 f"carrier head {result['head']})")
    lines.append(f"verdict: {result['verdict']['reason']}")
    lines.append(f"device: {result['device_name']}")
    return "\n".join(lines)


def _transfer_summary(result: dict[str, Any]) -> str:
    steps = lambda value: f"not within {result['budget']:,} steps" if value is None else f"{value:,} steps"
    speedup = result["speedup"]
    word = "positive" if speedup > 1 else "negative" if speedup < 1 else "no"
    return (f"delays {result['after']} learned in {steps(result['steps_from_scratch'])} from scratch, "
            f"{steps(result['steps_from_pretrained'])} after {result['pretrain_steps']:,} steps on delays "
            f"{result['before']} (which alone gave {result['pretrain_accuracy_on_b']:.2f} on them): "
            f"{word} transfer, ×{speedup:.2f} (learned: batch accuracy ≥ {result['bar']:g} for {result['patience']} "
            "steps)")


def _horizon_lines(result: dict[str, Any]) -> list[str]:
    """The horizons of an evaluation (accuracy ≥ the bar): measured on the lengths asked, predicted from the weights
    or why there is no prediction; and whether the prediction is trusted for this run."""
    bar, lines = result["horizon_accuracy"], []
    if result["measured_horizon_text"] is not None:  # (a transformer's run has none: no closed form)
        below = result["measured_horizon_below"]
        held = result["measured_horizon"] is not None  # else the text says it fell at the training length
        lines.append(f"measured horizon (accuracy ≥ {bar:g} at the lengths asked): {result['measured_horizon_text']}"
                     + (f"; below {bar:g} at {below:,}" if held and below is not None else ""))
    if result["predicted_horizon"] is not None:
        lines.append(f"predicted horizon (from the weights, looked for up to {result['predicted_horizon_ceiling']:,}): "
                     f"{result['predicted_horizon_text']}")
    elif result["predicted_horizon_reason"]:
        none = "" if result["predicted_horizon_note"] == NOT_SEARCHED else "none: "
        lines.append(f"predicted horizon: {none}{result['predicted_horizon_reason']}")
    if result["prediction_status"] is not None:
        lines.append(f"prediction: {result['prediction_status']}: {result['prediction_status_reason']}")
    return lines


def _summary(result: dict[str, Any]) -> str:
    """A short readable form of a result for people (use --json for everything)."""
    if "points" in result and "run_delays" in result:
        return _delay_summary(result)
    if "steps_from_scratch" in result:
        return _transfer_summary(result)
    if "lengths" in result:
        number = lambda value: "—" if value is None else f"{value:.3f}"
        header = (f"{'length':>9} {'accuracy':>9} {'beyond':>7} {'vote':>7} {'predicted':>9} {'p':>7} {'p pred':>7} "
                  f"{'argmax':>8}")
        lines = [f"{header} {'rule':>8}"]
        lines += [  # vote: the ideal vote readout (the most attended token answers) on the same sequences
            f"{r['length']:>9} {r['accuracy']:>9.3f} {number(r['accuracy_beyond']):>7} "
            f"{number(r.get('vote_accuracy')):>7} {number(r['predicted_accuracy']):>9} {r['target_mass']:>7.3f} "
            f"{number(r['predicted_target_mass']):>7} {r['argmax_key']:>8} {r['rule']:>8}"
            for r in result["lengths"]
        ]
        lines.append(f"verdict: {result['verdict']['reason']}")
        lines.append(("fitted law: " if result["fit"] else "") + result["fit_reason"])
        lines += _horizon_lines(result)
        lines.append(f"device: {result['device_name']}")
        return "\n".join(lines)
    if "exact_log_denominator" in result and "probe" not in result:
        exact = result["exact_log_denominator"] or {}
        return "\n".join([f"ln Z_t at t = {t}: measured {v:.3f}" + (f", exact {exact[t]:.3f}" if t in exact else "")
                          for t, v in result["log_denominator"].items()] + [result["note"], f"device: {result['device_name']}"])
    if "probe" in result:
        return _absolute_lines(result) + f"\ndevice: {result['device_name']}"
    if "heads" in result:
        return "\n".join([*(_head_line(h) for h in result["heads"]), f"device: {result['device_name']}"])
    if "sweep_id" in result:
        number = lambda value, form: "—" if value is None else format(value, form)
        lines = [f"{c['encoding']:>10} {c['attention']:>8} k {c['offset']:>3} L {c['train_length']:>4} "
                 f"V {c['vocab_size']:>3} seed {c['seed']:>3}  "
                 + (f"error: {c['error']}" if "error" in c else
                    f"delays {c['delays']:>6} {'learned' if c['learned'] else 'did not learn':>13}  seen "
                    f"{number(c['mean_seen'], '.2f')}  unseen {number(c['mean_unseen'], '.2f')}  near unseen "
                    f"{number(c['mean_near_unseen'], '.2f')}  {c['run_id']}" if c.get("delays") else
                    f"{'learned' if c['learned'] else 'did not learn':>13}  m_out {number(c['m_out'], '.2f'):>6}  "
                    f"horizon {number(c['predicted_horizon'], ',')}  {c['run_id']}")
                 for c in result["cells"]]
        collapse = result["collapse"]
        lines.append(f"collapse: rms {collapse['rms']:.3f} from the master curve in {collapse['variable']} with the "
                     f"scale fitted (s = {collapse['scale']:,.0f}; {collapse['rms_unscaled']:.3f} without); spread "
                     f"{collapse['spread_scaled']:.3f} in it against {collapse['spread_raw']:.3f} in raw length "
                     f"({collapse['note']})" if collapse["points"] else f"collapse: {collapse['note']}")
        lines.append(f"{result['ran']} cells run here, {result['trained']} trained; table: {result['table']}")
        return "\n".join(lines)
    if "runs" in result:
        learned = lambda r: "" if r["verdict"] is None else "  learned" if r["verdict"]["learned"] else "  did not learn"
        return "\n".join(f"{r['run_id']}  steps {r['steps']}  acc {r['train_accuracy']:.3f}{learned(r)}"
                         + ("  (preset, read-only)" if r["preset"] else "")
                         for r in result["runs"]) \
            or f"no runs in {result['root']}"
    skip = {"config", "spectrum", "carrier", "singular_values", "near_recurrences", "verdict", "baseline",
            "baseline_range"}
    lines = [f"{key}: {value}" for key, value in result.items() if key not in skip]
    if "verdict" in result:
        lines.append(f"verdict: {result['verdict']['reason']}")
    if "baseline" in result:
        lines.append("untrained baseline: " + ", ".join(f"{k} {v}" for k, v in result["baseline"].items()))
    if "baseline_range" in result:
        spread = result["baseline_range"]
        lines.append(f"untrained range over {spread['seeds']} initialisations (seeds from {spread['first_seed']}): "
                     + ", ".join(f"{k} {v[0]:g} to {v[1]:g}" for k, v in spread.items() if isinstance(v, list)))
    if "near_recurrences" in result:
        lines.append(f"near_recurrences: {len(result['near_recurrences'])} (first offsets "
                     f"{[r['offset'] for r in result['near_recurrences'][:5]]})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    deterministic_cublas()  # before any CUDA work: a CUDA training is the same bytes each time
    limit_heap_growth()  # the served app's heap thresholds, for every command (lengen.runtime)
    try:
        args = build_parser().parse_args(argv)
        args.console = Console.for_command(stderr, args.budget, args.json)
        result = COMMANDS[args.command](args, RunStore())
    except KeyboardInterrupt:
        stderr.write("lengen: interrupted (Ctrl-C): what this command had finished is kept; the work it was "
                     "doing was not saved\n")
        return INTERRUPTED
    except Interrupted as error:
        stderr.write(f"lengen: {' '.join(str(error).split())}\n")
        return INTERRUPTED
    except (UsageError, *USER_ERRORS) as error:
        stderr.write(f"lengen: error: {' '.join(str(error).split())}\n")
        return 2
    except OSError as error:  # the store's folder cannot be written, say
        stderr.write(f"lengen: error: {' '.join(str(error).split())} (check LENGEN_HOME)\n")
        return 2
    stdout.write((json.dumps(_finite(result), indent=2) if args.json else _summary(result)) + "\n")
    return 0

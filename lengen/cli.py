"""Command line: `python -m lengen train|construct|continue|evaluate|transfer|carrier|heads|absolute|sweep|runs|
delete`.

Each command returns its own typed answer (lengen.results), which formats itself for stdout: JSON under
`--json`, a short readable summary otherwise. Runs are read from
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
`evaluate RUN` with no options asks what the app asks (`evaluation_request`): a single head at the Dilution page's
first view, the default request a new run is stored with, so it prints the numbers that page opens with.
`evaluate` computes what was asked: the evaluation at the lengths, and the prediction from the weights
(`--predict`) and the predicted horizon's search (`--horizon`) only when asked, or where the run was
stored with them (measured once when the app trained it, or shipped with a preset), read from there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO, get_args

from lengen.api import RULE_LONGEST, default_lengths
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
from lengen.results import (
    Absolute,
    CarrierResult,
    DelayEvaluation,
    Deleted,
    Denominators,
    Evaluation,
    Heads,
    Listed,
    Result,
    Runs,
    Swept,
    Trained,
    TransferResult,
    Where,
    finite,
)
from lengen.runtime import deterministic_cublas, limit_heap_growth
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
from lengen_core.analysis.absolute import (
    PROBE_BASELINE_SEEDS,
    PROBE_SAMPLES,
    analyse_absolute_position,
    sink_length_of,
)
from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.delays import DELAY_SAMPLES, delay_curve
from lengen_core.analysis.heads import analyse_heads
from lengen_core.analysis.mask import mask_share
from lengen_core.analysis.rules import RULES, InferenceRule, rule_with_parameter
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
    EVALUATION_SEED,
    check_measurement,
    measure,
    search_ceiling,
    search_predicted_horizon,
    shipped_horizon,
)
from lengen_core.models.encodings import LengthError
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import Run, Training, resolve_device
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
    e.add_argument("--lengths", type=_lengths, default=None,
                   help=f"comma separated; default the app's: for a single head the Dilution page's (k + 1, then the "
                        f"training length doubled up to {FIRST_VISIT_LONGEST:,}, those its encoding allows; under a "
                        f"--rule up to {RULE_LONGEST:,}), for a transformer the Transformer page's (1×…16× training)")
    e.add_argument("--samples", type=int, default=None,
                   help=f"sequences per length (default {FIRST_VISIT_SAMPLES}, the Dilution page's), or per delay "
                        f"(default {DELAY_SAMPLES})")
    e.add_argument("--seed", type=int, default=EVALUATION_SEED, help="seed of the evaluation sequences")
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


def _load(run_id: str, store: RunStore, device: str = "cpu") -> Run:
    """The run from the person's store, else from the presets shipped with the lab, on `device`
    (a name `resolve_device` takes; an unavailable one is a user error before the run is read)."""
    target = str(resolve_device(device))
    presets = preset_store()
    run = presets.load(run_id, target) if not store.exists(run_id) and presets.exists(run_id) else store.load(run_id, target)
    return run


def command_train(args: argparse.Namespace, store: RunStore) -> Trained:
    return _trained(config_from_args(args), args, store)


def command_continue(args: argparse.Namespace, store: RunStore) -> Trained:
    """Train a stored run further, as a new run that records which run it continues."""
    return _trained(continuation(_load(args.run_id, store).config, args.steps), args, store)


def _trained(config: RunConfig, args: argparse.Namespace, store: RunStore) -> Trained:
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
    return Trained(run, config, reused)


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


def command_construct(args: argparse.Namespace, store: RunStore) -> Trained:
    """`train` with init constructed: the construction itself (steps 0), or trained on from it."""
    args.init = "constructed"
    return command_train(args, store)




def evaluation_request(run: Run, lengths: Sequence[int] | None, samples: int | None,
                       rule: InferenceRule | None = None) -> tuple[tuple[int, ...], int]:
    """The lengths and samples `evaluate` measures: those given, else what the app asks for this run. A single
    head: the Dilution page's first view, lengen.first_visit's default request (k + 1, then the training length
    doubled up to FIRST_VISIT_LONGEST, those its encoding allows; FIRST_VISIT_SAMPLES sequences), the numbers a new
    run is stored with, so `evaluate RUN` prints the page's numbers; under an inference rule, those up to
    RULE_LONGEST, where the page reads its rules. A transformer (or a shift run): the Transformer page's lengths,
    1×…16× training (up to the longest sequence a forward pass takes), at the same samples. These are
    lengen.api.measure's and rule_curve's defaults too."""
    lengths = default_lengths(run, rule) if lengths is None else lengths  # the API's, which the pages ask
    return tuple(lengths), FIRST_VISIT_SAMPLES if samples is None else samples


def command_evaluate(args: argparse.Namespace, store: RunStore) -> Evaluation | DelayEvaluation:
    """The run measured (lengen_core.measure) at the lengths asked, by default the app's request
    (`evaluation_request`), written out as it is."""
    rule = rule_with_parameter(args.rule, args.rule_param)
    run = _load(args.run_id, store, args.device)
    config = run.config
    if config.task.task in DELAY_TASKS or args.delays is not None:
        return _evaluate_delays(run, args)
    lengths, samples = evaluation_request(run, args.lengths, args.samples, rule)
    console: Console = args.console
    pricer = console.pricer()
    shipped = _stored_measurement(args.run_id, store)
    # refused before any work; what is stored or not asked for is not priced
    check_measurement(run, lengths, samples, rule, args.seed, shipped, pricer, args.predict)
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
        m = measure(run, lengths, samples, rule, args.seed, shipped=shipped, prices=pricer,
                    predict=args.predict, search=args.horizon and not searched, progress=progress)
    if searched:
        with console.estimated("searching the predicted horizon", search_seconds):
            horizon, note = search_predicted_horizon(run, rule, ceiling, shipped, pricer)
        m = dataclasses.replace(m, predicted_horizon=horizon, horizon_note=note)
    return Evaluation(m, config.task.task, config.task.vocab_size, Where.of(run))


def _evaluate_delays(run: Run, args: argparse.Namespace) -> DelayEvaluation:
    """A delay task's run against the delay (lengen_core.analysis.delays); the length options do not apply."""
    config = run.config
    if config.task.task not in DELAY_TASKS:
        raise ConfigError(f"--delays reads a run of the {' or '.join(DELAY_TASKS)} task; {run.run_id} is on the "
                          f"{config.task.task} task: use --lengths")
    if args.lengths is not None or args.rule != "none" or args.predict or args.horizon:
        raise ConfigError("a delay task's run is evaluated at its training length against the delay: --lengths, "
                          "--rule, --predict and --horizon do not apply (use --delays)")
    samples = DELAY_SAMPLES if args.samples is None else args.samples
    curve = delay_curve(run.model, config, args.delays, samples, args.seed)
    return DelayEvaluation(run.run_id, config.task.task, run.verdict, curve, Where.of(run))


def command_transfer(args: argparse.Namespace, store: RunStore) -> TransferResult:
    """Steps to learn the configured run's delays after `--before` delays, against from scratch (trains
    three runs in memory; none is stored)."""
    config = config_from_args(args)
    pricer = args.console.pricer()
    for priced in (with_changes(config, delays=args.before, steps=args.pretrain_steps or config.train.steps),
                   config, config):
        pricer.check_training(priced)
    args.console.estimate()
    return TransferResult(config, transfer(config, args.before, args.pretrain_steps, args.device, args.patience))


def _stored_measurement(run_id: str, store: RunStore):
    """What the run was stored with (lengen.first_visit), from the person's store or the presets;
    `measure` takes a piece of it only where it answers exactly the question asked."""
    source = store if store.exists(run_id) else preset_store()
    try:
        return from_dict(source.first_visit(run_id))
    except (KeyError, TypeError, ValueError):  # written by another version: measured afresh
        return None


def command_heads(args: argparse.Namespace, store: RunStore) -> Heads:
    run = _load(args.run_id, store, args.device)
    console: Console = args.console
    console.pricer().check_head_analysis(run.config)
    with console.estimated("analysing the heads", console.estimate()):
        found = analyse_heads(run.model, run.config)
    return Heads(run.run_id, tuple(found), Where.of(run))


def command_absolute(args: argparse.Namespace, store: RunStore) -> Absolute | Denominators:
    run = _load(args.run_id, store, args.device)
    length = args.length or run.config.task.train_length
    console: Console = args.console
    if run.config.model.minimal:  # no residual stream to probe: the mask's share alone, exact for RoPE
        sink_length = sink_length_of(run.config)
        console.pricer().check_mask_share(run.config, sink_length, args.samples)
        with console.estimated("reading the denominators", console.estimate()):
            share = mask_share(run.model, run.config, sink_length, args.samples)
        positions = sorted({0, 1, run.config.task.train_length - 1, sink_length - 1})
        return Denominators(run.run_id, sink_length, args.samples,
                            {t: float(share.measured[0, 0, t]) for t in positions},
                            None if share.exact is None else {t: float(share.exact[0, t]) for t in positions},
                            Where.of(run))
    console.pricer().check_absolute_position(run.config, length, args.samples)
    with console.counted("probing absolute position", console.estimate(), "models") as progress:
        done, total = iter(range(1, PROBE_BASELINE_SEEDS + 5)), PROBE_BASELINE_SEEDS + 4
        found = analyse_absolute_position(run.model, run.config, args.samples, length,
                                          each=None if progress is None else lambda: progress(next(done), total))
    return Absolute(run.run_id, found, Where.of(run))


def command_carrier(args: argparse.Namespace, store: RunStore) -> CarrierResult:
    run = _load(args.run_id, store, args.device)
    console: Console = args.console
    console.pricer().check_carrier(run.config, args.search_length)  # said first; refused only under --budget
    seconds = console.estimate()
    with console.counted("extracting the carrier", seconds, "parts") as progress:
        carrier = extract_carrier(run.model, run.config, search_length=args.search_length, progress=progress)
    return CarrierResult(run.run_id, run.verdict, carrier, Where.of(run))


def command_runs(args: argparse.Namespace, store: RunStore) -> Runs:
    presets = preset_store()
    listed = tuple(Listed(summary, source is presets) for source in (store, presets) for summary in source.list_runs()
                   if source is store or not store.exists(summary.run_id))
    return Runs(store.root, presets.root, listed, store.corrupt_runs())


def command_delete(args: argparse.Namespace, store: RunStore) -> Deleted:
    if not store.exists(args.run_id) and preset_store().exists(args.run_id):
        preset_store().delete(args.run_id)  # refuses: the presets are read-only
    store.delete(args.run_id)
    return Deleted(args.run_id)


def command_sweep(args: argparse.Namespace, store: RunStore) -> Swept:
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
    return Swept(result, collapse_summary(result.cells))


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


def main(argv: Sequence[str] | None = None, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    deterministic_cublas()  # before any CUDA work: a CUDA training is the same bytes each time
    limit_heap_growth()  # the served app's heap thresholds, for every command (lengen.runtime)
    try:
        args = build_parser().parse_args(argv)
        args.console = Console.for_command(stderr, args.budget, args.json)
        result: Result = COMMANDS[args.command](args, RunStore())
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
    stdout.write((json.dumps(finite(result.to_json()), indent=2) if args.json else result.text()) + "\n")
    return 0

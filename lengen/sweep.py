"""Sweeps: a grid of runs, each trained (or taken from the store), evaluated and analysed, gathered
into one table.

    grid = SweepGrid(encodings=("rope", "learned"), offsets=(1, 3, 5), seeds=(0, 1, 2))
    result = run_sweep(grid, store_root)                     # the local backend: a process pool
    result = run_sweep(grid, store_root, backend="ray", address="127.0.0.1:6379")
    result.table()                                           # one row per cell and length (pandas)

A cell is one config: the grid's product of encodings, attentions, offsets, training lengths,
vocabulary sizes, seeds and delay sets over the `base` settings. The delay sets are the data-diversity
axis of the delay tasks (`base` task delay-copy or selective-copy): how many delays training saw, e.g.
"2;2-4;2-8" on the command line; a delay cell is read against the delay at its training length
(lengen_core.analysis.delays: the mean accuracy over its trained and its unseen delays), not at the
lengths. A grid without delay sets keeps the id it had before the axis existed. Each cell runs `run_cell`, a plain function of
picklable arguments, in a worker: it loads the run from the store (or the presets) or trains and saves it (with its first-visit numbers, lengen.first_visit.save_run), checks
every cost against the budgets before the work, then evaluates at the grid's lengths and reads the
verdict, the dilution fit (m_out), the carrier's argmax offset and the predicted horizon. A cell
whose config is invalid, or whose work is over a budget or fails, gives a row with its `error`; the
other cells go on.

What is kept (`<store root>/sweeps/<sweep id>/`): `grid.json`, one `cells/<index>.json` per cell as
it finishes, and the table as `table.csv` and `table.parquet` when the call ends. A sweep that is
stopped or killed resumes where it left off (a finished cell is read back, not run again; a cell that
failed is tried again), and a sweep run twice trains nothing the second time (its runs are in the
store). The sweep id is a hash of the grid.

Backends. `local`: a `concurrent.futures.ProcessPoolExecutor` (spawned workers, one torch thread
each). `ray`: the same function as a Ray task on an existing cluster (`address`) or a local Ray
instance (no address); Ray's scheduler places the tasks, nothing here queues or retries. Ray
workers save the runs they train into the same store path, so a cluster needs a shared filesystem
at that path (docs/sweeps.md). No other module needs Ray; it is imported only by that backend.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from lengen import budget
from lengen.budget import SERVER, BudgetError, Budgets, Pricer, duration
from lengen.first_visit import first_visit_seconds, save_run
from lengen.runtime import env_whole_number, ray_modules
from lengen.store import RunStore, preset_store
from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.collapse import Collapse, collapse
from lengen_core.analysis.delays import DELAY_TOKENS, delay_curve
from lengen_core.analysis.evaluate import MAX_EVAL_SAMPLES, LengthError, check_lengths
from lengen_core.analysis.sequence import tokens_per_batch
from lengen_core.config import DELAY_TASKS, MAX_EVAL_LENGTH, ConfigError, RunConfig, parse_delays, with_changes
from lengen_core.measure import measure
from lengen_core.training import train

Backend = Literal["local", "ray"]
CELL_BASELINE_SEEDS = 1  # a cell reads the carrier's argmax and margin only: no untrained range to pay for
MAX_CELLS = 512  # cells in one sweep (the hosted app's budget may allow fewer: `check_grid`)
MAX_GRID_LENGTHS = 16


@dataclass(frozen=True)
class Axis:
    """One axis of a grid, under every name it goes by: the one registry the grid, the TOML file, the
    command line's options, the table's columns and the Sweeps page read."""

    setting: str  # the config's own name: a cell's key and the table's column ("vocab_size")
    field: str  # the grid's field and the TOML key ("vocab_sizes"); the option is the same with dashes
    kind: type  # str or int: how the command line and the page read a value
    label: str  # the Sweeps page's label
    example: str  # the command line's help
    note: str = ""  # what else a value must be, for the help
    aliases: tuple[str, ...] = ()  # older spellings, still accepted in a TOML file and on the command line
    separator: str = ","  # between values on the command line (a delays value holds commas itself)

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


# In the grid's order: a cell's index (its file, and the sweep id's meaning) depends on it.
AXES = (
    Axis("encoding", "encodings", str, "Encodings", "rope,learned"),
    Axis("attention", "attentions", str, "Attention", "softmax"),
    Axis("offset", "offsets", int, "Offsets k", "1,3,5", note="each below the training length"),
    Axis("train_length", "train_lengths", int, "Training lengths", "16"),
    Axis("vocab_size", "vocab_sizes", int, "Vocabulary sizes V", "16", aliases=("vocabs",)),
    Axis("seed", "seeds", int, "Seeds", "0,1,2"),
    Axis("delays", "delay_sets", str, "Training delays", "2;2-4;2-8", separator=";",
         note="a delay task's (--set task=delay-copy): each value a delays spec, separated by ';'"),
)
NO_DELAYS = ("",)  # the delay sets of a grid without the axis: left out of its id
GRID_AXES = tuple(axis.setting for axis in AXES)  # the config's own names
SWEEPS_DIR = "sweeps"
NOT_RUN = "not run: the sweep was cancelled"  # the error of a cell a cancelled sweep left for next time
NUMBER_COLUMNS = {"m_out", "m_out_low", "m_out_high", "m_out_lengths_low", "m_out_lengths_high", "plain_m_out",
                  "carrier_margin", "argmax_offset", "predicted_horizon",
                  "measured_horizon", "predicted_horizon_ceiling", "steps", "length", "accuracy", "accuracy_low",
                  "accuracy_high", "target_mass", "delay_count", "mean_seen", "mean_unseen",
                  "mean_near_unseen"}  # the table's numeric figures, whichever cells have them
LENGTH_COLUMNS = ("length", "accuracy", "accuracy_low", "accuracy_high", "target_mass")  # a row of a cell's lengths


class SweepError(ValueError):
    """A grid that cannot run: too many cells, no cells, bad lengths; the message says what is allowed."""


@dataclass(frozen=True)
class SweepGrid:
    """The grid: one cell per combination of the axes, each over `base` (flat config settings)."""

    encodings: tuple[str, ...] = ("rope",)
    attentions: tuple[str, ...] = ("softmax",)
    offsets: tuple[int, ...] = (3,)
    train_lengths: tuple[int, ...] = (16,)
    vocab_sizes: tuple[int, ...] = (16,)
    seeds: tuple[int, ...] = (0,)
    delay_sets: tuple[str, ...] = NO_DELAYS
    lengths: tuple[int, ...] = (16, 64, 256, 1024)
    samples: int = 512
    base: tuple[tuple[str, Any], ...] = ()  # other settings, e.g. (("steps", 600),) or {"steps": 600}

    def __post_init__(self) -> None:
        for name in (*(axis.field for axis in AXES), "lengths"):
            values = tuple(dict.fromkeys(getattr(self, name)))  # repeats dropped, order kept
            if not values:
                raise SweepError(f"the grid's {name.replace('_', ' ')} are empty: give at least one")
            object.__setattr__(self, name, values)
        object.__setattr__(self, "lengths", tuple(sorted(self.lengths)))
        object.__setattr__(self, "base", tuple(sorted(dict(self.base).items())))  # a dict, or pairs in any order
        if any(isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_EVAL_LENGTH for n in self.lengths):
            raise SweepError(f"evaluation lengths must be whole numbers from 2 to {MAX_EVAL_LENGTH:,}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or not 1 <= self.samples <= MAX_EVAL_SAMPLES:
            raise SweepError(f"samples {self.samples!r}: allowed 1 to {MAX_EVAL_SAMPLES:,}")
        if len(self.lengths) > MAX_GRID_LENGTHS:
            raise SweepError(f"{len(self.lengths)} evaluation lengths; a sweep allows at most {MAX_GRID_LENGTHS}")
        if self.size > MAX_CELLS:
            raise SweepError(f"the grid has {self.size} cells; a sweep allows at most {MAX_CELLS}: "
                             "fewer seeds, offsets or other values")
        self._check_delay_sets()
        try:
            with_changes(RunConfig(), **{**dict(self.base), "delays": self.delay_sets[0]})
        except ConfigError as error:
            raise SweepError(f"the grid's base settings: {error}") from None

    def _check_delay_sets(self) -> None:
        """Delay sets exactly for a delay task in the base, each a valid spec."""
        task = dict(self.base).get("task", RunConfig().task.task)
        if "delays" in dict(self.base):
            raise SweepError("the training delays are the grid's delay sets (--delay-sets), not a base setting")
        if task in DELAY_TASKS and "" in self.delay_sets:
            raise SweepError(f"a sweep of the {task} task needs its delay sets, e.g. --delay-sets '2;2-4;2-8'")
        if task not in DELAY_TASKS and self.delay_sets != NO_DELAYS:
            raise SweepError(f"delay sets need a delay task in the base (--set task=delay-copy or selective-copy); "
                             f"the base task is {task}")
        for spec in self.delay_sets:
            try:
                parse_delays(spec)
            except ConfigError as error:
                raise SweepError(f"the grid's delay sets: {error}") from None
    @property
    def axes(self) -> dict[str, tuple]:
        """Setting -> values of every axis the grid has (the delay sets only where it has them: a grid of
        the length tasks has the cells, columns and id it had before that axis existed)."""
        return {axis.setting: getattr(self, axis.field) for axis in AXES
                if axis.field != "delay_sets" or self.delay_sets != NO_DELAYS}

    @property
    def size(self) -> int:
        return math.prod(len(values) for values in self.axes.values())

    def cells(self) -> list[dict[str, Any]]:
        """Each cell's axis settings, in a fixed order (the index of a cell is stable)."""
        axes = self.axes
        return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["base"] = dict(self.base)
        if self.delay_sets == NO_DELAYS:  # a grid of the length tasks: its id as before the axis
            del data["delay_sets"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepGrid:
        data = dict(data)
        data["base"] = tuple(dict(data.get("base", {})).items())
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in data.items()})

    def sweep_id(self) -> str:
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return "sweep-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


def grid_from_toml(path: str | Path) -> dict[str, Any]:
    """The grid's fields from a TOML file: `encodings = ["rope", "learned"]`, `offsets = [1, 3, 5]`, …,
    `samples = 512`, and a `[base]` table of other settings; `SweepError` names what is wrong."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise SweepError(f"cannot read the grid file {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SweepError(f"the grid file {path} is not valid TOML: {error}") from None
    for axis in AXES:
        for alias in axis.aliases:  # an older spelling: read as the axis it names
            if alias in data and axis.field in data:
                raise SweepError(f"the grid file {path} gives both {alias} and {axis.field}: keep {axis.field}")
            if alias in data:
                data[axis.field] = data.pop(alias)
    known = {item.name for item in dataclasses.fields(SweepGrid)}
    unknown = set(data) - known
    if unknown:
        raise SweepError(f"the grid file {path} has unknown key(s) {', '.join(sorted(unknown))}: "
                         f"allowed {', '.join(sorted(known))}")
    return data


def cell_config(grid: SweepGrid, settings: dict[str, Any]) -> RunConfig:
    """The cell's config: the base settings with the cell's; `ConfigError` if that is not a valid run."""
    return with_changes(RunConfig(), **{**dict(grid.base), **settings})


def run_cell(store_root: str, config_data: dict[str, Any], lengths: Sequence[int], samples: int,
             device: str = "cpu", limited: bool = True) -> dict[str, Any]:
    """Train (or load) one cell's run and measure it: a JSON-ready record. Runs in a worker process
    (or a Ray task), so everything it needs comes as plain arguments and it opens the store itself.
    `limited`: each cost checked against the server's budgets (the app); False at a person's terminal."""
    prices = SERVER if limited else Pricer(Budgets.unlimited())
    torch.set_num_threads(1)  # one cell a worker: the pool (or Ray) spreads the cores
    config = RunConfig.from_dict(config_data)
    store = RunStore(Path(store_root))
    presets = preset_store()  # the runs shipped with the lab (absent on a Ray worker that has only lengen_core)
    found = next((source for source in (store, presets) if source.exists(config.run_id())), None)
    reused = found is not None
    if found is not None:
        run = found.load(config.run_id(), device)
    else:
        prices.check_training(config)
        run = train(config, device)
        save_run(store, run)  # with its first-visit numbers, so the app opens it as it does a run it trained
    return {"run_id": run.run_id, "reused": reused, **measure_run(run, lengths, samples, prices)}


def measure_run(run, lengths: Sequence[int], samples: int, prices: Pricer = SERVER) -> dict[str, Any]:
    """The verdict, the measurement at `lengths` (those the run allows; lengen_core.measure, as the command
    line's evaluate and the app take it), and the carrier's argmax offset and margin (single head only);
    each cost is checked against the budgets first."""
    config, model = run.config, run.model
    if config.task.task in DELAY_TASKS:
        return measure_delays(run, samples)
    allowed = []
    for n in lengths:
        try:
            check_lengths(config, model, [n])
        except LengthError:
            continue
        allowed.append(n)
    record: dict[str, Any] = {"learned": run.verdict.learned, "steps": run.steps, "verdict": run.verdict.reason,
                              "lengths": [], "m_out": None, "m_out_low": None, "m_out_high": None,
                              "m_out_lengths_low": None, "m_out_lengths_high": None, "plain_m_out": None,
                              "fit_status": None, "argmax_offset": None, "carrier_margin": None,
                              "predicted_horizon": None, "measured_horizon": None}
    search = 4 * config.task.train_length
    if config.single_head:
        prices.check_carrier(config, search, CELL_BASELINE_SEEDS)  # priced with the measurement, before either starts
    m = measure(run, allowed, samples, prices=prices)
    record["lengths"] = [{"length": r.length, "accuracy": float(r.accuracy), "accuracy_low": float(r.accuracy_low),
                          "accuracy_high": float(r.accuracy_high), "target_mass": float(r.target_mass)}
                         for r in m.reports]
    if not config.single_head:
        return record
    record["fit_status"] = m.fit.status
    if (law := m.fit.fit) is not None:  # the weighted law, its two intervals, and the plain law's m_out
        record.update(m_out=law.m_out, m_out_low=law.m_out_low, m_out_high=law.m_out_high,
                      m_out_lengths_low=law.quoted_low, m_out_lengths_high=law.quoted_high,
                      plain_m_out=law.plain_law.m_out)
    carrier = extract_carrier(model, config, search_length=search, baseline_seeds=CELL_BASELINE_SEEDS)
    record.update(argmax_offset=int(carrier.argmax_offset), carrier_margin=float(carrier.margin))
    record["measured_horizon"] = None if m.measured_horizon is None else m.measured_horizon.length
    record["predicted_horizon"] = None if m.predicted_horizon is None else m.predicted_horizon.length
    record["predicted_horizon_ceiling"] = m.horizon_ceiling
    if m.horizon_note is not None:
        record["predicted_horizon_note"] = m.horizon_note
    if m.horizon_reason is not None:
        record["predicted_horizon_reason"] = m.horizon_reason
    if m.prediction_status is not None:
        record["prediction_status"] = m.prediction_status.status
        record["prediction_status_reason"] = m.prediction_status.reason
    return record


NEAR = 2  # an unseen delay this close to a trained one is "near" (the neighbours a kernel may still reach)


def measure_delays(run, samples: int) -> dict[str, Any]:
    """A delay cell: its verdict and its accuracy against the delay at every delay its context holds, summed
    up as the mean over its trained delays, its unseen ones and the unseen ones within `NEAR` of a trained one
    (samples cut to the request's token budget, `DELAY_TOKENS`)."""
    config = run.config
    L = config.task.train_length
    samples = max(1, min(samples, DELAY_TOKENS // (L * (L - 1))))
    curve = delay_curve(run.model, config, None, samples)
    own = config.task.delay_set
    near = [p.accuracy for p in curve.unseen() if min(abs(p.delay - d) for d in own) <= NEAR]
    return {"learned": run.verdict.learned, "steps": run.steps, "verdict": run.verdict.reason, "lengths": [],
            "delay_count": len(own), "mean_seen": curve.mean_accuracy(True), "mean_unseen": curve.mean_accuracy(False),
            "mean_near_unseen": sum(near) / len(near) if near else None, "delay_samples": samples}


@dataclass
class SweepProgress:
    done: int  # cells finished (run now or read back), errors included
    total: int
    errors: int
    elapsed_seconds: float
    seconds_left: float | None  # from the cells run in this call so far; None before the first

    @property
    def left(self) -> int:
        return self.total - self.done


@dataclass
class SweepResult:
    sweep_id: str
    grid: SweepGrid
    cells: list[dict[str, Any]]  # in the grid's order: settings, run_id, … or error
    cancelled: bool = False
    ran: int = 0  # cells run by this call (the rest were read back)
    trained: int = 0  # runs trained by this call (the rest came from the store)
    backend: str = "local"
    directory: Path | None = None  # where the sweep is kept (sweep_dir)

    @property
    def csv_path(self) -> Path | None:
        return None if self.directory is None else self.directory / "table.csv"

    @property
    def parquet_path(self) -> Path | None:
        return None if self.directory is None else self.directory / "table.parquet"

    def configs(self) -> dict[str, RunConfig]:
        """Run id -> config of every cell that ran: the grid's base with the cell's own axis settings (each cell
        holds them), read by key, not by the cell's place in the grid."""
        return {cell["run_id"]: cell_config(self.grid, {setting: cell[setting] for setting in self.grid.axes})
                for cell in self.cells if cell.get("run_id")}

    def table(self):
        """One row per (cell, length): the cell's settings and figures beside the length's accuracy and mass;
        a cell with an error (or no lengths) gives one row with `error`."""
        import pandas as pd

        rows = []
        for cell in self.cells:
            flat = {key: value for key, value in cell.items() if key != "lengths"}
            for length in cell.get("lengths") or [{}]:
                rows.append({**flat, **length})
        table = pd.DataFrame(rows)
        for name in NUMBER_COLUMNS & set(table.columns):  # a figure no cell has (None throughout) is NaN, not object
            table[name] = pd.to_numeric(table[name])
        for name in ("learned", "reused"):
            if name in table and table[name].isna().any():  # an error row has neither: true/false/missing
                table[name] = table[name].astype("boolean")
        front = [name for name in (*GRID_AXES, "run_id", *LENGTH_COLUMNS) if name in table]
        return table[front + sorted(set(table.columns) - set(front))]  # the same order run now or read back


def sweep_dir(store_root: Path, sweep_id: str) -> Path:
    return Path(store_root) / SWEEPS_DIR / sweep_id


def _read_cell(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing, or cut short by a kill: run it again


def stored_sweep(grid: SweepGrid, store_root: Path) -> SweepResult | None:
    """A sweep read back from `store_root` (the person's store, or the presets'), None unless every cell
    is there; nothing runs."""
    directory = sweep_dir(store_root, grid.sweep_id())
    cells = []
    for index, settings in enumerate(grid.cells()):
        record = _read_cell(directory / "cells" / f"{index}.json")
        if record is None:
            return None
        cells.append({**settings, **record})
    return SweepResult(grid.sweep_id(), grid, cells, directory=directory)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    partial.replace(path)  # atomic: a killed sweep leaves a whole file or none


def run_sweep(grid: SweepGrid, store_root: Path, backend: Backend = "local", workers: int | None = None,
              address: str | None = None, progress: Callable[[SweepProgress], None] | None = None,
              cancel: threading.Event | None = None, device: str = "cpu", limited: bool = True) -> SweepResult:
    """Run every cell not finished before; `cancel` set stops handing out cells (running ones finish
    and are kept). The result holds every cell, in the grid's order. `limited` False: no cell is refused
    over the server's budgets (the command line without --budget)."""
    if backend not in ("local", "ray"):
        raise SweepError(f"backend {backend!r}: allowed local, ray")
    directory = sweep_dir(store_root, grid.sweep_id())
    _write_json(directory / "grid.json", grid.to_dict())
    settings = grid.cells()
    results: list[dict[str, Any] | None] = [_read_cell(directory / "cells" / f"{i}.json") for i in range(len(settings))]
    todo: list[tuple[int, dict[str, Any]]] = []
    for index, cell in enumerate(settings):
        if results[index] is not None:
            continue
        try:
            config = cell_config(grid, cell)
        except ConfigError as error:
            results[index] = {**cell, "error": f"invalid config: {error}"}
            continue
        todo.append((index, config.to_dict()))
    start, ran, trained = time.perf_counter(), 0, 0

    def finished(index: int, record: dict[str, Any]) -> None:
        nonlocal ran, trained
        results[index] = {**settings[index], **record}
        if "error" not in record:  # a failed cell is tried again by the next run of the sweep
            _write_json(directory / "cells" / f"{index}.json", results[index])
        ran += 1
        trained += 0 if record.get("reused", True) else 1
        if progress is not None:
            done = sum(r is not None for r in results)
            elapsed = time.perf_counter() - start
            left = len(results) - done
            progress(SweepProgress(done, len(results), sum("error" in r for r in results if r), elapsed,
                                   elapsed / ran * left if ran else None))  # cells finish every elapsed/ran

    runner = _run_ray if backend == "ray" else _run_local
    cancelled = runner(todo, str(store_root), grid, workers, address, finished, cancel, device, limited)
    cells = [r if r is not None else {**settings[i], "error": NOT_RUN}
             for i, r in enumerate(results)]
    result = SweepResult(grid.sweep_id(), grid, cells, cancelled, ran, trained, backend, directory=directory)
    table = result.table()  # beside the runs, as CSV and as Parquet (its types kept); the Sweeps page offers both
    table.to_csv(result.csv_path, index=False)
    table.to_parquet(result.parquet_path, index=False)
    return result


def _error_record(error: BaseException) -> dict[str, Any]:
    return {"error": f"{type(error).__name__}: {' '.join(str(error).split())}"}


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A pool worker, spawned without the parent's `__main__` and deaf to Ctrl-C.

    A spawn re-runs the parent's `__main__` file in the child; under `streamlit run` or AppTest that is
    the app script, which has no business running (or failing) in a worker: the child is started with a
    bare `__main__` instead (restored at once). A Ctrl-C in a terminal reaches the whole process group:
    the workers ignore it (an ignored signal stays ignored across the exec), and the sweep, in the main
    process, decides what stops."""

    _bare_main = types.ModuleType("__main__")
    _lock = threading.Lock()

    def start(self) -> None:
        in_main_thread = threading.current_thread() is threading.main_thread()
        with self._lock:
            saved, sys.modules["__main__"] = sys.modules["__main__"], self._bare_main
            interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main_thread else None
            try:
                super().start()
            finally:
                if interrupt is not None:
                    signal.signal(signal.SIGINT, interrupt)
                if sys.modules["__main__"] is self._bare_main:  # a script thread may have set its own meanwhile
                    sys.modules["__main__"] = saved


class _WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn context of one pool: its workers are `_WorkerProcess`es, remembered so that an interrupted
    sweep can stop them."""

    def __init__(self) -> None:
        self.workers: list[_WorkerProcess] = []

    def Process(self, *args, **kwargs) -> _WorkerProcess:  # the name the pool calls
        worker = _WorkerProcess(*args, **kwargs)
        self.workers.append(worker)
        return worker


def _run_local(todo, store_root: str, grid: SweepGrid, workers: int | None, address: str | None,
               finished, cancel: threading.Event | None, device: str, limited: bool = True) -> bool:
    """Cells through a process pool; True if it stopped early: `cancel` set (running cells finish and are
    kept) or Ctrl-C (running cells are stopped at once and run again next time)."""
    if address is not None:
        raise SweepError("an address is for the ray backend; the local backend runs on this machine")
    count = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    context = _WorkerContext()  # spawned: no forked torch state in the workers
    queue = list(todo)
    pool = concurrent.futures.ProcessPoolExecutor(count, mp_context=context)
    futures: dict[concurrent.futures.Future, int] = {}
    try:
        while queue or futures:
            # hand out cells as workers free up (one waiting per worker), so a cancel leaves the rest unstarted
            while queue and len(futures) < 2 * count and not (cancel is not None and cancel.is_set()):
                index, config = queue.pop(0)
                futures[pool.submit(run_cell, store_root, config, grid.lengths, grid.samples, device, limited)] = index
            if not futures:
                break  # cancelled with nothing running
            done, _ = concurrent.futures.wait(futures, timeout=0.5, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                index = futures.pop(future)
                error = future.exception()
                finished(index, _error_record(error) if error else future.result())
            if cancel is not None and cancel.is_set():
                for future in list(futures):
                    if future.cancel():  # not started yet
                        del futures[future]
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        for worker in context.workers:
            if worker.is_alive():
                worker.terminate()
        return True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return cancel is not None and cancel.is_set()


def _run_ray(todo, store_root: str, grid: SweepGrid, workers: int | None, address: str | None,
             finished, cancel: threading.Event | None, device: str, limited: bool = True) -> bool:
    try:
        import ray
    except ImportError:
        raise SweepError("the ray backend needs Ray: pip install -r requirements-ray.txt") from None
    started_here = not ray.is_initialized()
    if started_here:  # the workers get this checkout's lengen and lengen_core from the driver
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     runtime_env={"py_modules": ray_modules()},
                     **({} if address else {"num_cpus": workers or os.cpu_count()}))
        except (ray.exceptions.RayError, ConnectionError, RuntimeError) as error:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise SweepError(f"could not connect to {where}: {' '.join(str(error).split())[:400]}. A cluster "
                             "started with `ray start --head` (Ray 2.60) uses token authentication: set "
                             "RAY_AUTH_MODE=token and give its token (~/.ray/auth_token or RAY_AUTH_TOKEN)") from None
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        refs = {task.remote(store_root, config, grid.lengths, grid.samples, device, limited): index for index, config in todo}
        pending = list(refs)
        try:
            _gather_ray(ray, refs, pending, finished, cancel)
        except KeyboardInterrupt:  # Ctrl-C: Ray stops the tasks; the finished cells are kept
            for ref in refs:
                ray.cancel(ref, force=True)
            return True
        return cancel is not None and cancel.is_set()
    finally:
        if started_here:
            ray.shutdown()


def _gather_ray(ray, refs: dict, pending: list, finished, cancel: threading.Event | None) -> None:
    """Each task's record as it finishes, until none is left; `cancel` set cancels the rest."""
    while pending:
        if cancel is not None and cancel.is_set():
            for ref in pending:
                ray.cancel(ref)
        done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
        for ref in done:
            try:
                finished(refs[ref], ray.get(ref))
            except ray.exceptions.TaskCancelledError:
                continue
            except ray.exceptions.RayError as error:  # a task's failure is the cell's, not the sweep's
                cause = getattr(error, "cause", None) or error
                finished(refs[ref], _error_record(cause))


COLLAPSE_ENCODING = "rope"  # the collapse gathers relative-position runs whose accuracy the dilution law describes
POINT_FIELDS = ("run_id", "offset", "seed", "vocab_size", "m_out")  # what each collapse point carries of its cell


def collapse_cells(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells the data collapse reads: learned RoPE runs with a fitted m_out. The one filter: the collapse,
    its summary (the command line's and the page's) and the page's points all read it."""
    return [cell for cell in cells
            if cell.get("encoding") == COLLAPSE_ENCODING and cell.get("learned") and cell.get("m_out") is not None]


def collapse_points(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per measured length ≥ L_train of each `collapse_cells` cell, each keyed by its run id and
    length and carrying its cell's POINT_FIELDS beside its accuracy."""
    return [{**{name: cell.get(name) for name in POINT_FIELDS}, "length": row["length"], "accuracy": row["accuracy"]}
            for cell in collapse_cells(cells)
            for row in cell.get("lengths", []) if row["length"] >= cell["train_length"]]


@dataclass(frozen=True)
class SweepCollapse:
    """A sweep's collapse: the result (None: no point to collapse), its points, each with its own scaled length
    `x` and the master curve's value `theory` there (A_V(scale·x)), so a reader joins nothing by position,
    how many runs they come from, and a sentence on what went in."""

    result: Collapse | None
    points: tuple[dict[str, Any], ...]
    runs: int
    note: str


def sweep_collapse(cells: Sequence[dict[str, Any]]) -> SweepCollapse:
    """The collapse of the `collapse_points` of `cells`."""
    points, runs = collapse_points(cells), len(collapse_cells(cells))
    if not points:
        return SweepCollapse(None, (), runs, "no learned RoPE cell with a fitted m_out: nothing to collapse")
    n, a, m, V = (np.array([point[name] for point in points]) for name in ("length", "accuracy", "m_out", "vocab_size"))
    result = collapse(n, a, m, V)
    placed = tuple({**point, "x": float(x), "theory": float(theory)}
                   for point, x, theory in zip(points, result.x, result.theory, strict=True))  # collapse's own order
    return SweepCollapse(result, placed, runs, f"{len(points)} points of {runs} learned RoPE runs, lengths ≥ L_train")


def collapse_summary(cells: Sequence[dict[str, Any]], found: SweepCollapse | None = None) -> dict[str, Any]:
    """The JSON form: the variable, rms from the master curve A_V(scale·x) with its fitted scale, rms_unscaled
    from A_V(x), and the two spreads (lengen_core.analysis.collapse), or why there is none. `found`: the
    collapse of these cells, where the caller has it."""
    found = found or sweep_collapse(cells)
    result, note = found.result, found.note
    if result is None:
        return {"variable": None, "rms": None, "scale": None, "rms_unscaled": None, "spread_scaled": None,
                "spread_raw": None, "points": 0, "note": note}
    return {"variable": result.variable, "rms": result.rms, "scale": result.scale, "rms_unscaled": result.rms_unscaled,
            "spread_scaled": result.spread_scaled, "spread_raw": result.spread_raw, "points": result.points,
            "note": note}


SWEEP_CELLS_ENV, SWEEP_SECONDS_ENV = "LENGEN_SWEEP_CELLS", "LENGEN_SWEEP_SECONDS"
DEFAULT_SWEEP_CELLS, DEFAULT_SWEEP_SECONDS = 48, 1_800


def sweep_seconds(grid: SweepGrid) -> float:
    """The estimated seconds of every valid cell's training (as if none were stored) and its measurement for the
    app's first visit (`first_visit_seconds`), evaluation, prediction and carrier (lengen.budget's
    estimates, summed: one worker)."""
    total = 0.0
    for cell in grid.cells():
        try:
            config = cell_config(grid, cell)
        except ConfigError:
            continue  # reported as the cell's error, costs nothing
        L = config.task.train_length
        total += budget.training_cost(config).seconds + first_visit_seconds(config)
        if config.task.task in DELAY_TASKS:
            continue  # the curve: at most DELAY_TOKENS tokens through one head, a second or two
        if config.single_head:
            total += budget.single_head_evaluation_cost(config, grid.lengths, grid.samples).seconds
            total += budget.prediction_cost(config, sorted({L, *grid.lengths})).seconds
            total += budget.carrier_cost(config, 4 * L, CELL_BASELINE_SEEDS).seconds
        else:
            total += budget.evaluation_cost(config, grid.lengths, grid.samples, tokens_per_batch(config)).seconds
    return total


def check_sweep(grid: SweepGrid) -> float:
    """A sweep this server will run: at most LENGEN_SWEEP_CELLS cells (default 48) and LENGEN_SWEEP_SECONDS
    of estimated work (default 1,800); `BudgetError` names the limit and what to change. Returns the estimate."""
    cells, seconds = env_whole_number(SWEEP_CELLS_ENV, DEFAULT_SWEEP_CELLS), env_whole_number(SWEEP_SECONDS_ENV,
                                                                                           DEFAULT_SWEEP_SECONDS)
    if grid.size > cells:
        raise BudgetError(f"this sweep has {grid.size} cells, over this server's limit of {cells} ({SWEEP_CELLS_ENV}): "
                          "choose fewer seeds, offsets or other values")
    estimate = sweep_seconds(grid)
    if estimate > seconds:
        raise BudgetError(f"this sweep would take about {duration(estimate)}, over this server's limit of "
                          f"{duration(seconds)} ({SWEEP_SECONDS_ENV}): choose fewer cells, fewer or shorter lengths, "
                          "fewer samples or fewer steps")
    return estimate

"""Cached access to runs and to every analysis of a run, keyed by run id and arguments.

Models are loaded once per process (`st.cache_resource`) and shared between sessions, so nothing
here or in a page may change a model in place; analyses are plain data (`st.cache_data`). They are
loaded onto `analysis_device()`, the app's one device for trainings and analyses: `$LENGEN_DEVICE`,
auto by default (CUDA, then MPS, then the CPU); every analysis computes there and hands back CPU data.

A run's measurement (`measurement`: lengen_core.measure's evaluation, prediction, law and horizons, the
one chain the command line's evaluate and a sweep's cells run too) is cached whole, keyed by run id,
lengths, samples and rule. Evaluations alone (the Start page's picture, the lessons' accuracy charts)
are cached length by length, so a sweep that is not all cached yet shows a bar of the lengths done
(`Progress`), and a longer sweep reuses the shorter one's lengths. The numbers are those of one
batched call, the measurement's rows among them: each length draws its sequences from its own seed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Self, TypeVar

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx

from lengen import budget
from lengen.api import dilution_table
from lengen.budget import check_attention_map, check_carrier, check_single_head_evaluation
from lengen.first_visit import (
    FIRST_VISIT_LONGEST,
    FIRST_VISIT_SAMPLES,
    allowed,
    carrier_from_dict,
    from_dict,
    request_lengths,
)
from lengen.presets import precomputed, preset_ids
from lengen.runtime import DEVICE_ENV, device_setting
from lengen.store import RunStore, StoreError, preset_store
from lengen_core.analysis.carrier import Carrier, extract_carrier
from lengen_core.analysis.evaluate import LengthReport, check_lengths, check_sweep, evaluate
from lengen_core.analysis.fit import FitResult
from lengen_core.analysis.heatmap import Heatmap, attention_heatmap
from lengen_core.analysis.rules import parse_rule
from lengen_core.claims import encoding_record
from lengen_core.config import DELAY_TASKS, SETTINGS, RunConfig
from lengen_core.measure import Measurement, Shipped, measure
from lengen_core.training import Run, resolve_device

T = TypeVar("T")
FIRST_VISIT_WAIT = 60.0  # seconds a page waits for a just-trained run's numbers (3-4 s idle) before measuring it itself
BAR_DELAY = 0.5  # seconds of work before the bar shows (Streamlit's spinner waits as long): cached work never flashes one


def stores() -> list[RunStore]:
    """The person's store first (runs trained here), then the presets shipped with the app."""
    return [RunStore(), preset_store()]


def is_stored(run_id: str) -> bool:
    """Is the run in the person's store or among the presets (so a page can open it)?"""
    return any(store.exists(run_id) for store in stores())


def stored_configs() -> dict[str, RunConfig]:
    """run id -> config of every readable stored run (presets included), newest first."""
    summaries = sorted((s for store in stores() for s in store.list_runs()), key=lambda s: s.created, reverse=True)
    return {s.run_id: s.config for s in summaries}


def stored_run_ids() -> list[str]:
    return list(stored_configs())


def run_options() -> list[str]:
    """Every run a picker offers: the presets first, then the stored runs, newest first."""
    return list(dict.fromkeys([*preset_ids().values(), *stored_run_ids()]))


def analysis_device() -> str:
    """Where the app loads runs and computes their analyses: `$LENGEN_DEVICE` (auto, cpu, cuda or
    mps; auto when unset: CUDA, then MPS, then the CPU). A device this machine lacks is an error
    naming the variable."""
    try:
        return str(resolve_device(device_setting()))
    except ValueError as error:
        raise ValueError(f"{error} (the app's device is set by {DEVICE_ENV})") from None


@st.cache_resource(show_spinner="Loading run…", max_entries=32)
def load_run(run_id: str) -> Run:
    """The stored run (the person's store first, then the presets), on `analysis_device()`, read-only."""
    for store in stores():
        if store.exists(run_id):
            run = store.load(run_id, analysis_device())
            run.model.eval()
            run.model.requires_grad_(False)
            return run
    raise StoreError(f"no run named {run_id} in {', '.join(str(s.root) for s in stores())}")


def run_labels(run_ids: Iterable[str]) -> dict[str, str]:
    """run id -> a label no other run in `run_ids` shares, that begins with what tells the runs apart.

    A picker's value is its option's label (Streamlit matches the browser's choice back by label),
    so two runs with one label would be one choice. A preset is 'Preset: RoPE'. Another run's label
    is relative to the other runs shown: the settings in which they differ come first, in the order
    `LABEL_ORDER` (encoding, k, L, V, seed, then task and model: 'seed 2 · RoPE k=3 L=16'; a later setting,
    steps or d_model, only for runs that the earlier ones do not tell apart), then the
    run's encoding, k and L where they are shared, and any setting off its default that all share is
    left out (but a task, layers × heads or attention off the default), so a narrow picker cuts only the end. The label ends with the start of its config hash,
    lengthened to the whole id in the unlikely case that is shared.
    """
    run_ids = list(dict.fromkeys(run_ids))
    presets = {run_id: name for name, run_id in preset_ids().items()}
    configs = stored_configs()
    trained = {r: configs[r] for r in run_ids if r not in presets and r in configs}
    differing = [name for name in PRIMARY if len({_setting(c, name) for c in trained.values()}) > 1]
    alike: dict[tuple, list[RunConfig]] = {}  # runs that the primary settings do not tell apart
    for config in trained.values():
        alike.setdefault(tuple(_setting(config, name) for name in PRIMARY), []).append(config)

    def named(run_id: str) -> list[str]:  # the primary settings that differ, then what tells its look-alikes apart
        config = trained.get(run_id)
        if config is None:
            return differing
        group = alike[tuple(_setting(config, name) for name in PRIMARY)]
        return differing + [name for name in LABEL_ORDER[len(PRIMARY):] if len({_setting(c, name) for c in group}) > 1]

    labels = {run_id: _label(run_id, presets.get(run_id), configs.get(run_id), named(run_id), short=True)
              for run_id in run_ids}
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return {run_id: label if counts[label] == 1 else
            _label(run_id, presets.get(run_id), configs.get(run_id), named(run_id), short=False)
            for run_id, label in labels.items()}


# The settings a label may name, in the order it names them: what a person varies most first. "layout" is
# layers × heads together; every other setting of lengen_core.config follows in its own order.
LABEL_ORDER = ("encoding", "offset", "train_length", "vocab_size", "seed", "task", "layout", "attention",
               "length_mode", "steps", "d_model", "qk_init", "learning_rate", "init",
               *(name for name in SETTINGS if name not in
                 {"encoding", "offset", "train_length", "vocab_size", "seed", "task", "n_layers", "n_heads",
                  "attention", "length_mode", "steps", "d_model", "qk_init", "learning_rate", "init"}))
PRIMARY = LABEL_ORDER[:8]  # named wherever they differ; the rest only between runs these do not tell apart
ALWAYS_NAMED = ("encoding", "offset", "train_length")  # what a run is, even when every run shown shares it
NAMED_OFF_DEFAULT = ("task", "layout", "attention")  # shared but off the default: a shift transformer says so


def _setting(config: RunConfig, name: str):
    if name == "layout":
        return config.model.n_layers, config.model.n_heads
    return getattr(getattr(config, SETTINGS[name].section), name)


def _named(config: RunConfig, name: str) -> str:
    """One setting as a label says it: 'RoPE', 'k=3', 'L=16', 'V=16', 'seed 0', '1 layer × 2 heads'."""
    value = _setting(config, name)
    if name == "offset" and config.task.task in DELAY_TASKS:  # a delay task answers at its delays, not at k
        return f"d={config.task.delays}"
    if name == "layout":
        layers, heads = value
        return "single head" if layers == 0 else \
            f"{layers} layer{'s' * (layers != 1)} × {heads} head{'s' * (heads != 1)}"
    short = {"encoding": lambda v: encoding_record(v).display, "offset": "k={}".format, "train_length": "L={}".format,
             "vocab_size": "V={}".format, "seed": "seed {}".format, "task": str,
             "attention": "{} attention".format, "length_mode": "{} lengths".format, "steps": "{:,} steps".format}
    if name in short:
        return short[name](value)
    if isinstance(value, bool):
        return f"{SETTINGS[name].label}: {'yes' if value else 'no'}"
    return f"{SETTINGS[name].label} {value:g}" if isinstance(value, float) else f"{SETTINGS[name].label} {value}"


def _label(run_id: str, preset: str | None, config: RunConfig | None, differing: Sequence[str], short: bool) -> str:
    if preset is not None:
        return f"Preset: {preset}" if short else f"Preset: {preset} · #{run_id}"
    if config is None:
        return run_id  # not readable here: its id is all there is to show
    first = ", ".join(_named(config, name) for name in differing)
    rest = " ".join(_named(config, name) for name in LABEL_ORDER if name not in differing and (
        name in ALWAYS_NAMED or name in NAMED_OFF_DEFAULT and _setting(config, name) != _setting(RunConfig(), name)))
    tag = run_id.rsplit("-", 1)[-1][:6] if short else run_id
    return " · ".join(part for part in (first, rest, f"#{tag}") if part)


class Progress:
    """A bar for work done length by length over one or more runs, drawn once the work has taken
    `BAR_DELAY` seconds (by a timer thread, as Streamlit's spinner is) and removed when it ends.

        with Progress("Comparing", runs=3) as progress:
            for run_id in run_ids:
                comparison(run_id, ..., progress)   # calls progress.at(j, m, length) before each length
                progress.next_run()
    """

    def __init__(self, what: str, runs: int = 1, unit: str = "run") -> None:
        self.what, self.runs, self.unit = what, runs, unit  # unit: what is counted ("run", "rule")
        self.run, self.done, self.lengths, self.length = 0, 0, 0, None
        self.now: str | None = None  # what is computed once the lengths are done
        self._lock = threading.Lock()
        self._shown = self._closed = False
        self._slot = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Self:
        self._slot = st.empty()
        self._timer = threading.Timer(BAR_DELAY, self._show)
        add_script_run_ctx(self._timer)
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            self._slot.empty()

    def at(self, done: int, lengths: int, length: int | None) -> None:
        """`done` of this run's `lengths` lengths are done; `length` is next."""
        with self._lock:
            self.done, self.lengths, self.length, self.now = done, lengths, length, None
            self._draw()

    def doing(self, what: str) -> None:
        """The lengths are done; `what` (e.g. 'the carrier') is being computed."""
        with self._lock:
            self.length, self.now = None, what
            self._draw()

    def next_run(self) -> None:
        with self._lock:
            self.run, self.done, self.lengths, self.length = min(self.run + 1, self.runs), 0, 0, None
            self.now = None
            self._draw()

    def fraction(self) -> float:
        within = self.done / self.lengths if self.lengths else 0.0
        return min(1.0, (self.run + within) / self.runs)

    def text(self) -> str:
        parts = [f"{self.unit} {self.run + 1} of {self.runs}"] if self.runs > 1 else []
        if self.lengths:
            parts.append(f"{self.done} of {self.lengths} lengths done")
        if self.length is not None:
            parts.append(f"now L = {self.length:,}")
        elif self.now is not None:
            parts.append(f"now {self.now}")
        return f"{self.what}: {', '.join(parts) or 'starting'}"

    def _show(self) -> None:
        with self._lock:
            self._shown = True
            self._draw()

    def _draw(self) -> None:  # under the lock
        if self._shown and not self._closed:
            self._slot.progress(self.fraction(), text=self.text())


def length_by_length(lengths: Sequence[int], measure: Callable[[int], T], progress: Progress | None,
                     what: str) -> list[T]:
    """`measure` at each length in turn, counted on `progress` (a bar of its own when None)."""
    if progress is None:
        with Progress(what) as own:
            return length_by_length(lengths, measure, own, what)
    results = []
    for done, length in enumerate(lengths):
        progress.at(done, len(lengths), length)
        results.append(measure(length))
    progress.at(len(lengths), len(lengths), None)
    return results


def evaluation(run_id: str, lengths: tuple[int, ...], samples: int = 256,
               progress: Progress | None = None) -> list[LengthReport]:
    """`evaluate` at `lengths`, checked as one request, measured and cached length by length."""
    run = load_run(run_id)
    check_lengths(run.config, run.model, lengths)
    check_sweep(lengths, samples)
    check_single_head_evaluation(run.config, lengths, samples)  # this server's budgets, for the whole request
    return length_by_length(lengths, lambda length: _evaluation_at(run_id, length, samples), progress, "Evaluating")


@st.cache_data(show_spinner=False, max_entries=1024)  # the bar says what is going on
def _evaluation_at(run_id: str, length: int, samples: int) -> LengthReport:
    known = shipped(run_id)  # a preset's or a stored run's, computed by the same call before (`shipped`)
    if known is not None and length in known.evaluations.get(samples, {}):
        return known.evaluations[samples][length]
    run = load_run(run_id)
    return evaluate(run.model, run.config, [length], samples=samples)[0]


def first_visit_data(run_id: str) -> dict:
    """What was measured of the run before anyone opened a page, as stored: a preset's shipped file
    (scripts.build_presets) or the numbers a run trained here was saved with (lengen.first_visit);
    {} for neither. A run whose numbers are being measured where it trained (it is reported done first) is
    waited for, up to FIRST_VISIT_WAIT seconds, rather than measured here too on the same cores."""
    store = stores()[0]
    if not store.exists(run_id):  # a preset (or no run): what ships with it, if anything
        return precomputed(run_id)
    # the person's store first, as load_run reads the weights: a run retrained under a preset's id is that run,
    # and a preset's numbers would describe other weights
    deadline = time.monotonic() + FIRST_VISIT_WAIT
    while (data := store.first_visit(run_id)) is None and store.first_visit_pending(run_id) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    return data or {}


def await_first_visit(run_id: str) -> None:
    """A run trained a moment ago is reported done before its first-visit numbers are stored (they are measured
    right after, where it trained: lengen.first_visit.save_run): a page that opens it says so while
    they come, up to FIRST_VISIT_WAIT seconds, instead of measuring them again on the same cores."""
    store = stores()[0]
    if not store.exists(run_id) or not store.first_visit_pending(run_id):
        return
    with st.spinner("This run has just been trained: its numbers for the pages are being measured where it trained "
                    "(3–4 s on an idle 2-core server); the page fills in when they are stored.", show_time=True):
        first_visit_data(run_id)


def shipped(run_id: str) -> Shipped | None:
    """What was measured of the run before anyone opened a page: a preset's shipped numbers
    (scripts.build_presets), or those a run trained here was saved with (lengen.first_visit:
    measured where its training ended, at the pages' default request). Both come from the calls
    `measure` makes, so a first visit computes none of them again. None for a run without them (one
    stored before they were, or a transformer): its pages measure it."""
    return from_dict(first_visit_data(run_id))


def measurement(run_id: str, lengths: tuple[int, ...], samples: int = 256, rule: str = "none",
                progress: Progress | None = None) -> Measurement:
    """The run measured at `lengths` under the rule `rule` (a label: "none", "ntk:4"): lengen_core.measure,
    the call the command line's evaluate and a sweep's cells make, so a page shows their numbers for the
    same request. Checked against this server's budgets before any work; cached whole (`progress` says
    what is being measured, once the lengths before it are done)."""
    if progress is not None:
        progress.doing(f"measuring {len(lengths)} lengths" + ("" if rule == "none" else f" under {rule}"))
    return _measurement(run_id, tuple(lengths), samples, rule)


def is_default_request(run_id: str, lengths: Sequence[int], samples: int) -> bool:
    """Whether `lengths` and `samples` ask what the default request asks (lengen.first_visit):
    the same samples and the same lengths from the training length on, the only ones the law, the
    horizons and the prediction's key count read (Compare leaves out k + 1, which the Dilution page draws)."""
    run = load_run(run_id)
    L = run.config.task.train_length
    return samples == FIRST_VISIT_SAMPLES and [n for n in lengths if n >= L] == [n for n in request_lengths(run) if n >= L]


def request_caption(run_id: str, m: Measurement, page: str) -> str:
    """What `m` measured, said on `page`, and how its numbers relate to the other pages': the default
    request (those of the Dilution page and Compare agree) or another one (then they may differ, and why)."""
    lengths = m.lengths
    what = (f"Measured at {len(lengths)} lengths, {lengths[0]:,} to {lengths[-1]:,}, {m.samples:,} sequences each "
            f"(seed {m.seed:,})")
    if is_default_request(run_id, lengths, m.samples):
        stored = shipped(run_id) is not None
        return (f"{what}: the default request ({FIRST_VISIT_SAMPLES} sequences, lengths doubling up to "
                f"{FIRST_VISIT_LONGEST:,}), which the Dilution page and Compare share, so the two show the same "
                "m_out and horizons for this run" + (", measured once before anyone opened a page." if stored else "."))
    return (f"{what}, not the default request ({FIRST_VISIT_SAMPLES} sequences at lengths doubling up to "
            f"{FIRST_VISIT_LONGEST:,}) that the Dilution page and Compare open with: m_out and the measured horizon "
            f"are fitted to the lengths and samples measured, so {page} differs from those defaults here by design.")


@st.cache_data(show_spinner="Measuring the run…", max_entries=128)
def _measurement(run_id: str, lengths: tuple[int, ...], samples: int, rule: str) -> Measurement:
    return measure(load_run(run_id), lengths, samples, parse_rule(rule), shipped=shipped(run_id), prices=budget)


@dataclass(frozen=True)
class DilutionData:
    """What the Dilution page draws (and a lesson's dilution steps): the measured and predicted rows, the
    law fitted to them, and the fitted p on a grid where it was fitted (None without a law)."""

    measurement: Measurement
    table: pd.DataFrame  # a row per length: measured, predicted, and `fitted_mass` where there is a law
    fit_table: pd.DataFrame | None  # length, fitted_mass: the training length to the longest fitted length

    @property
    def reports(self) -> list[LengthReport]:
        return list(self.measurement.reports)

    @property
    def result(self) -> FitResult:
        return self.measurement.fit


def dilution_data(run_id: str, lengths: tuple[int, ...], samples: int) -> DilutionData:
    """The run's measurement at `lengths`, as the Dilution page's table, with the fitted law on a grid
    (lengen.api.dilution_table: the notebook's table is this one; a run without a prediction has NaN there)."""
    m = measurement(run_id, lengths, samples)
    table, fit_table = dilution_table(m)
    return DilutionData(m, table, fit_table)


@st.cache_data(show_spinner="Extracting the carrier…", max_entries=64)
def carrier(run_id: str, search_length: int) -> Carrier:
    """The run's carrier with near-recurrences searched up to `search_length`: the one stored with the run
    (extracted by the same call where it trained, at the default search) when it answers that search."""
    stored = carrier_from_dict(first_visit_data(run_id).get("carrier"), search_length)
    if stored is not None:
        return stored
    run = load_run(run_id)
    check_carrier(run.config, search_length)  # this server's budgets (lengen.budget)
    return extract_carrier(run.model, run.config, search_length=search_length)


@st.cache_data(show_spinner="Computing attention…", max_entries=64)
def heatmap(run_id: str, length: int, max_cells: int = 256, layer: int = 0, head: int = 0) -> Heatmap:
    run = load_run(run_id)
    check_attention_map(run.config, length, layer)  # this server's budgets (lengen.budget)
    return attention_heatmap(run.model, run.config, length, max_cells=max_cells, layer=layer, head=head)


def allowed_lengths(run_id: str, lengths: list[int]) -> list[int]:
    """The lengths the run's encoding accepts (a learned table ends at `max_positions`)."""
    return list(allowed(load_run(run_id), lengths))  # lengen.first_visit's rule, for a run id

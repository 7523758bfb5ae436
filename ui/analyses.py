"""Cached analyses for the Compare, Theory and Transformer pages, keyed by run id and arguments.

Like `ui.runs`, every function reads the shared model and returns plain data; none changes it.
`comparison` puts a single-head run and a transformer run into the same shape, so the Compare page
overlays them without asking which is which, from `ui.runs.measurement` (lengen_core.measure: the
numbers the command line and the Dilution page give for the same request); `comparisons` measures
several, one after another, under one bar ("run i of n, now measuring 9 lengths"). The Transformer
page's full-sequence evaluations are cached length by length, like `ui.runs.evaluation` (each length
has its own sequences, so the numbers are those of one batched call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import streamlit as st

from lengen.budget import (
    check_attention_map,
    check_carrier,
    check_head_analysis,
    check_sequence_evaluation,
)
from lengen.first_visit import FIRST_VISIT_CARRIER_SEARCH, ladder
from lengen.presets import RULE_LONGEST
from lengen_core.analysis.carrier import RECURRENCE_LIMIT, NearRecurrence
from lengen_core.analysis.equivariance import ShiftCheck, check_equivariance
from lengen_core.analysis.evaluate import LengthError, check_lengths, check_sweep
from lengen_core.analysis.fit import FitResult
from lengen_core.analysis.heads import HeadReport, analyse_heads
from lengen_core.analysis.heatmap import MAX_HEAD_MAP_CELLS, head_map
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.sequence import MAX_SEQUENCE_LENGTH, SequenceReport, evaluate_sequence
from lengen_core.claims import expectation
from lengen_core.config import ConfigError
from lengen_core.measure import Measurement
from lengen_core.training import Run
from ui.captions import readouts
from ui.captions.common import Caption, steps
from ui.runs import (
    Progress,
    allowed_lengths,
    carrier,
    length_by_length,
    load_run,
    measurement,
)

CARRIER_SEARCH = FIRST_VISIT_CARRIER_SEARCH  # the Carrier page's default: the two pages share the stored carrier
# How many near-recurrences the carrier lists at most (the earliest ones): past the last of a full list, an
# interval of offsets is not known to hold none.


def step_recurrences(run: Run, lengths: Sequence[int], accuracies: Sequence[float]
                     ) -> tuple[tuple[NearRecurrence, ...] | None, int | None]:
    """The carrier's near-recurrences (the Carrier page's search, CARRIER_SEARCH) and the offset up to which
    that list is complete, where the Dilution caption names a step (ui.captions.common.steps) past training
    on a run expected to extrapolate (lengen_core.claims) with an analytic carrier (RoPE); (None, None) elsewhere, or where the carrier is over this
    server's budget (the caption then names the steps alone)."""
    L, model = run.config.task.train_length, run.config.model
    if expectation(model.encoding, model.attention).accuracy != "extrapolates":  # the caption names no step then
        return None, None
    if not getattr(run.model.encoding, "rotary", False) or not any(s[0] >= L for s in steps(lengths, accuracies)):
        return None, None
    try:
        found = carrier(run.run_id, CARRIER_SEARCH).near_recurrences
    except ConfigError:
        return None, None
    complete = CARRIER_SEARCH if len(found) < RECURRENCE_LIMIT else found[-1].offset + 1
    return found, complete


def dilution_look_for(run: Run, table, fit: FitResult | None = None, measured: Horizon | None = None) -> Caption:
    """The Dilution chart's caption (ui.captions.readouts.dilution_caption) from the page's table
    (ui.runs.dilution_data): C1 over every length, the steps with their near-recurrences, which readout limits,
    called dilution as the law `fit` to the run says (the verdict the page's other captions read). `measured`:
    the Measurement's `measured_horizon`, the one the page's horizon caption shows (without it, the same rule
    on the table's numbers)."""
    lengths, accuracy = [int(n) for n in table["length"]], [float(a) for a in table["accuracy"]]
    recurrences, searched_to = step_recurrences(run, lengths, accuracy)
    votes = [None if np.isnan(v) else float(v) for v in table["vote_accuracy"]] if "vote_accuracy" in table else None
    return readouts.dilution_caption(
        run.config.model.encoding, run.config.model.attention, lengths, accuracy, list(table["predicted_accuracy"]),
        run.config.task.train_length, run.verdict, accuracy_low=list(table["accuracy_low"]),
        target_mass=list(table["target_mass"]), vote_accuracy=votes, samples=int(table["samples"].iloc[0]),
        recurrences=recurrences, searched_to=searched_to, fit=fit, measured=measured)


def rule_lengths(lengths: Sequence[int]) -> tuple[int, ...]:
    """The page's lengths the rules are read at: those up to RULE_LONGEST."""
    return tuple(n for n in lengths if n <= RULE_LONGEST)


def rule_note(lengths: Sequence[int], ruled: Sequence[int]) -> Caption | None:
    """Why the rules below stop before the page's lengths do (None: they do not)."""
    if len(ruled) == len(lengths):
        return None
    left = [n for n in lengths if n not in ruled]
    return Caption(
        f"The inference rules below are read at this page's lengths up to {RULE_LONGEST:,} ({len(ruled)} of "
        f"{len(lengths)}; {', '.join(f'{n:,}' for n in left)} left out).",
        "Each rule is an evaluation and a sweep over the keys at every length, and the longest lengths hold most of "
        "the tokens. Their 'none' row is the run measured at those lengths, so its m_out is fitted to them, not to "
        "the lengths above. Any length under a rule: `python -m lengen evaluate RUN_ID --lengths … --rule NAME` "
        "(docs/cli.md).")


def sequence_evaluation(run_id: str, lengths: tuple[int, ...], samples: int = 64,
                        progress: Progress | None = None) -> list[SequenceReport]:
    """`evaluate_sequence` at `lengths`, checked as one request, measured and cached length by length."""
    run = load_run(run_id)
    check_lengths(run.config, run.model, lengths)
    check_sweep(lengths, samples)
    too_long = [n for n in lengths if n > MAX_SEQUENCE_LENGTH]
    if too_long:
        raise LengthError(f"length {too_long[0]} is beyond {MAX_SEQUENCE_LENGTH}, the limit for full-sequence evaluation")
    check_sequence_evaluation(run.config, lengths, samples)  # this server's budgets, for the whole request
    return length_by_length(lengths, lambda length: _sequence_at(run_id, length, samples), progress,
                            "Evaluating every position")


@st.cache_data(show_spinner=False, max_entries=1024)  # the bar says what is going on
def _sequence_at(run_id: str, length: int, samples: int) -> SequenceReport:
    run = load_run(run_id)
    return evaluate_sequence(run.model, run.config, [length], samples=samples)[0]


@st.cache_data(show_spinner="Measuring every head…", max_entries=32)
def heads(run_id: str) -> list[HeadReport]:
    run = load_run(run_id)
    check_head_analysis(run.config)
    return analyse_heads(run.model, run.config)


@st.cache_data(show_spinner="Recording attention…", max_entries=64)
def head_attention(run_id: str, length: int, layer: int, head: int, samples: int = 16) -> np.ndarray:
    """Mean |attention weight| of one head over random sequences: (T, T), queries × keys, at full
    resolution (the page's lengths are at most 4 × 512 tokens). Only that head is kept, a sequence
    at a time, and the layers above it are not run (lengen_core.analysis.heatmap.head_map): memory is one
    T × T matrix and one forward pass, whatever the model."""
    run = load_run(run_id)
    check_attention_map(run.config, length, layer, samples)
    weights, _pool = head_map(run.model, run.config, length, layer, head, samples=samples,
                              max_cells=min(length, MAX_HEAD_MAP_CELLS))
    return weights


@st.cache_data(show_spinner="Shifting positions…", max_entries=64)
def equivariance(run_id: str, t: int, u: int) -> list[ShiftCheck]:
    return check_equivariance(load_run(run_id).model, t, u)


@dataclass(frozen=True)
class Comparison:
    """One run, measured the same way whatever its model."""

    run_id: str
    lengths: tuple[int, ...]
    accuracy: tuple[float, ...]  # at the query (retrieval) or over positions t ≥ k (shift)
    accuracy_low: tuple[float, ...]  # 95% Wilson interval
    accuracy_high: tuple[float, ...]
    target_mass: tuple[float, ...]  # of the head (the carrier head of a transformer)
    predicted_mass: tuple[float, ...] | None  # from the weights; single-head runs only
    carrier_offsets: np.ndarray
    carrier_values: np.ndarray
    carrier_source: str
    toeplitz_fraction: float
    toeplitz_baseline: float | None  # the same metric for the untrained initialisation (single head)
    toeplitz_range: tuple[float, float] | None  # its range over BASELINE_SEEDS initialisations (single head)
    toeplitz_relative: bool  # the encoding's logit depends on t − u alone: 1 for any weights
    baseline_seeds: int  # initialisations behind toeplitz_range
    carrier_argmax: int
    fit: FitResult  # the dilution law (single-head retrieval runs that learned and decay)
    samples: int  # sequences per length behind every figure
    measurement: Measurement  # where the lengths' figures, the law and the horizons come from
    target_mass_sem: tuple[float, ...] | None = None  # the standard error of each p (single head), for mass_caption

    @property
    def m_out(self) -> float | None:
        return None if self.fit.fit is None else self.fit.fit.m_out


def length_multiples(run_id: str, multiples: tuple[int, ...]) -> tuple[int, ...]:
    """m × the training length for each m, where the run's encoding allows it."""
    train_length = load_run(run_id).config.task.train_length
    return tuple(allowed_lengths(run_id, [m * train_length for m in multiples]))


def _multiples(run_id: str, longest: int) -> tuple[int, ...]:
    """Compare's lengths: the run's ladder without k + 1 (lengen.first_visit.ladder), those its encoding allows."""
    return tuple(allowed_lengths(run_id, list(ladder(load_run(run_id).config, longest, offset=False))))


def comparisons(run_ids: list[str], longest: int, samples: int) -> dict[str, Comparison]:
    """`comparison` of each run in turn, under one bar."""
    results = {}
    with Progress("Comparing", runs=len(run_ids)) as progress:
        for run_id in run_ids:
            results[run_id] = comparison(run_id, longest, samples, progress)
            progress.next_run()
    return results


def comparison(run_id: str, longest: int, samples: int, progress: Progress | None = None) -> Comparison:
    """One run measured at the doubling lengths up to `longest` (`ui.runs.measurement`, the numbers of the
    command line's evaluate and the Dilution page for the same lengths and samples), with its carrier."""
    run = load_run(run_id)
    lengths = _multiples(run_id, longest)
    if run.config.single_head:
        check_carrier(run.config, CARRIER_SEARCH)  # this server's budgets, before the measurement's work
    m = measurement(run_id, lengths, samples, progress=progress)
    reports = m.reports
    if run.config.single_head:
        if progress is not None:
            progress.doing("the carrier")
        found = carrier(run_id, CARRIER_SEARCH)
        offsets, values, source = found.offsets, found.values, found.source
        toeplitz, argmax, baseline = found.toeplitz_fraction, found.argmax_offset, found.baseline.toeplitz_fraction
        spread = None if found.baseline_range is None else found.baseline_range.toeplitz_fraction
        seeds = 0 if found.baseline_range is None else found.baseline_range.seeds
    else:
        if progress is not None:
            progress.doing("every head's carrier")
        best = max(heads(run_id), key=lambda h: (h.is_carrier, h.target_weight))
        offsets, values, source = np.arange(len(best.carrier)), best.carrier, f"measured, head L{best.layer}H{best.head}"
        toeplitz, argmax, baseline, spread, seeds = best.toeplitz_fraction, best.argmax_offset, None, None, 0
    return Comparison(
        run_id=run_id, lengths=lengths, accuracy=tuple(r.accuracy for r in reports),
        accuracy_low=tuple(r.accuracy_low for r in reports), accuracy_high=tuple(r.accuracy_high for r in reports),
        target_mass=tuple(r.target_mass for r in reports),
        predicted_mass=tuple(p.target_mass for p in m.predictions) if m.closed_form else None,
        carrier_offsets=offsets, carrier_values=values, carrier_source=source, toeplitz_fraction=toeplitz,
        toeplitz_baseline=baseline, toeplitz_range=spread, baseline_seeds=seeds,
        toeplitz_relative=expectation(run.config.model.encoding, run.config.model.attention).relative,
        carrier_argmax=argmax, fit=m.fit, samples=samples, measurement=m,
        target_mass_sem=tuple(r.target_mass_sem for r in reports) if m.closed_form else None,
    )

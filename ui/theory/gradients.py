"""The Theory page's optimisation experiment (C1), on the Learned (APE) preset's config.

Three pictures. The numbers of all three ship with the presets (scripts.build_presets --precompute writes
them with the calls below: lengen.presets.shipped_trace, lengen.presets.precomputed), so a visit computes
nothing heavy; without them (a config that is not the shipped one, a missing file) each is computed
once per server (st.cache_data) and priced before any work (lengen.budget: a refusal
shows in its place):

- reach: the constructed head (init constructed, steps 0) against the preset trained from its random
  start, accuracy to the end of the table (the preset's numbers are the shipped Start-page ones);
- gradients: the preset's own training replayed (same seed, data and steps) with the gradient norm of
  every position row recorded (lengen_core.optimisation.trace_training), about 280 steps;
- drift: training started from the construction, `DRIFT_STEPS` steps, accuracy at 4× on the way.

Computed, on a 2-core machine shared with other work: 7 s for the replay, 8 s for the drift, 1 s for
the reach (d_model 64; about twice as long at d_model 128).
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from lengen.budget import check_single_head_evaluation, check_training
from lengen.presets import (
    DRIFT_EVERY,
    DRIFT_STEPS,  # noqa: F401 (ui.theory.gradients.DRIFT_STEPS: the tests read the experiment here)
    GRADIENT_EVERY,
    OPTIMISATION_CONSTRUCTED,
    OPTIMISATION_DRIFT,
    OPTIMISATION_START,
    START_LENGTHS,
    START_SAMPLES,
    TRACE_LENGTHS,
    TRACE_ROWS,
    TRACE_SAMPLES,
    precomputed,
    shipped_trace,
)
from lengen_core.analysis.evaluate import LengthReport, evaluate
from lengen_core.config import ConfigError, RunConfig
from lengen_core.models.initial import initial_model
from lengen_core.optimisation import TrainingTrace, trace_training
from ui.runs import evaluation
from ui.theory import gradient_charts as charts
from ui.widgets import chart, refusal

RANDOM_START, CONSTRUCTED, TRAINED_ON = OPTIMISATION_START, OPTIMISATION_CONSTRUCTED, OPTIMISATION_DRIFT
L_TRAIN, FAR = TRACE_LENGTHS
OFFSET = RANDOM_START.task.offset
CHANCE = 1 / RANDOM_START.task.vocab_size
SHOWN_ROWS = TRACE_ROWS  # rows of the gradient map: the training range and three times as many past it


def _reports_table(start: str, reports: list[LengthReport], **columns) -> pd.DataFrame:
    return pd.DataFrame([{"start": start, **vars(r)} for r in reports]).assign(**columns)


def _shipped_reports(run_id: str, lengths: tuple[int, ...], samples: int) -> list[LengthReport] | None:
    """A run's evaluations shipped with the presets (scripts.build_presets), if every length is there."""
    shipped = precomputed(run_id).get("evaluations", {}).get(str(samples), {})
    if not all(str(n) in shipped for n in lengths):
        return None
    return [LengthReport(**shipped[str(n)]) for n in lengths]


def constructed_reports(lengths: tuple[int, ...], samples: int) -> list[LengthReport]:
    """The constructed head's evaluation at `lengths`: shipped, else computed (once per server, priced)."""
    return _shipped_reports(CONSTRUCTED.run_id(), lengths, samples) or _constructed_reports(lengths, samples)


def random_start_reports(lengths: tuple[int, ...], samples: int) -> list[LengthReport]:
    """The preset trained from its random start at `lengths`: shipped (its Start-page numbers), else evaluated."""
    return _shipped_reports(RANDOM_START.run_id(), lengths, samples) or evaluation(RANDOM_START.run_id(), lengths,
                                                                                     samples)


@st.cache_data(show_spinner="Evaluating the constructed head…", max_entries=4)
def _constructed_reports(lengths: tuple[int, ...], samples: int) -> list[LengthReport]:
    check_single_head_evaluation(CONSTRUCTED, lengths, samples)  # this server's budgets
    return evaluate(initial_model(CONSTRUCTED), CONSTRUCTED, list(lengths), samples=samples)


@st.cache_data(show_spinner="Training with the gradient of every position row recorded…", max_entries=4)
def _trace(config_json: str, every: int) -> TrainingTrace:
    config = RunConfig.from_dict(json.loads(config_json))  # written by _traced in full: nothing left to default
    check_training(config)  # this server's budgets, for the training and the evaluations on the way
    check_single_head_evaluation(config, [L_TRAIN, FAR] * (config.train.steps // every + 2), TRACE_SAMPLES)
    return trace_training(config, every, (L_TRAIN, FAR), TRACE_SAMPLES)


def _traced(config: RunConfig, every: int) -> TrainingTrace:
    """The trace shipped with the presets (scripts.build_presets), else trained once per server."""
    shipped = shipped_trace(config, every, (L_TRAIN, FAR), TRACE_SAMPLES)
    return shipped if shipped is not None else _trace(json.dumps(config.to_dict(), sort_keys=True), every)


def _trace_table(start: str, trace: TrainingTrace) -> pd.DataFrame:
    column = trace.lengths.index(FAR)
    return pd.DataFrame([{"start": start, "step": step, **vars(reports[column])}
                         for step, reports in zip(trace.evaluation_steps, trace.evaluations, strict=True)])


def reach() -> None:
    """(a) The construction retrieves to the end of its table; the trained run is at chance past L_train."""
    try:
        built = constructed_reports(START_LENGTHS, START_SAMPLES)
        trained = random_start_reports(START_LENGTHS, START_SAMPLES)
    except ConfigError as error:  # over this server's budget (lengen.budget)
        refusal("No comparison here", error)
        return
    table = pd.concat([_reports_table(charts.CONSTRUCTED, built), _reports_table(charts.RANDOM, trained)])
    max_positions = RANDOM_START.model.max_positions
    chart(charts.reach(table, CHANCE, L_TRAIN, max_positions),
          charts.reach_caption(table, CHANCE, L_TRAIN, OFFSET, max_positions), table, "constructed-reach",
          CONSTRUCTED.run_id())


def gradients() -> TrainingTrace | None:
    """(b) The gradient per position row over the preset's training from its random start."""
    try:
        trace = _traced(RANDOM_START, GRADIENT_EVERY)
    except ConfigError as error:
        refusal("No gradient trace here", error)
        return None
    norms = trace.row_gradient_norms[:, :SHOWN_ROWS]
    table = pd.DataFrame([{"step": step, "row": row, "gradient_norm": float(norms[i, row])}
                          for i, step in enumerate(trace.gradient_steps) for row in range(SHOWN_ROWS)])
    chart(charts.gradients(trace.row_gradient_norms, trace.gradient_steps, L_TRAIN, SHOWN_ROWS),
          charts.gradient_caption(len(trace.losses), L_TRAIN, RANDOM_START.model.max_positions,
                                  trace.largest_gradient_within(), trace.largest_gradient_beyond()),
          table, "row-gradients", RANDOM_START.run_id())
    return trace


def drift(random_start: TrainingTrace | None) -> None:
    """(c) Training started from the construction: accuracy at 4× over steps, beside the random start's."""
    try:
        trace = _traced(TRAINED_ON, DRIFT_EVERY)
    except ConfigError as error:
        refusal("No training from the construction here", error)
        return
    tables = [_trace_table(charts.CONSTRUCTED, trace)]
    if random_start is not None:
        tables.append(_trace_table(charts.RANDOM, random_start))
    table = pd.concat(tables)
    in_range = trace.accuracy(L_TRAIN)
    chart(charts.drift(table, CHANCE, FAR),
          charts.drift_caption(table, CHANCE, L_TRAIN, OFFSET, (float(in_range[0]), float(in_range[-1])),
                               (trace.losses[0], trace.losses[-1]), trace.largest_gradient_beyond()),
          table, "constructed-drift", TRAINED_ON.run_id())

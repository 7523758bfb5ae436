"""The Theory page's optimisation experiment (C1), on the Learned (APE) preset's config.

Three pictures, each computed once per server (st.cache_data; the config is fixed, so every session
shares them) and priced before any work (lengen_core.serving.budget: a refusal shows in its place):

- reach: the constructed head (init constructed, steps 0) against the preset trained from its random
  start, accuracy to the end of the table (the preset's numbers are the shipped Start-page ones);
- gradients: the preset's own training replayed (same seed, data and steps) with the gradient norm of
  every position row recorded (lengen_core.optimisation.trace_training), about 260 steps;
- drift: training started from the construction, `DRIFT_STEPS` steps, accuracy at 4× on the way.

Measured on a 2-core machine shared with other work: 7 s for the replay, 8 s for the drift, 1 s for
the reach; the next visit reads the cache.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from lengen_core.config import ConfigError, RunConfig, with_changes
from lengen_core.evaluate import LengthReport, evaluate
from lengen_core.optimisation import TrainingTrace, trace_training
from lengen_core.serving.budget import check_single_head_evaluation, check_training
from lengen_core.training import initial_model
from ui import optimisation_charts as charts
from ui.presets import PRESETS, START_LENGTHS, START_SAMPLES
from ui.runs import evaluation
from ui.widgets import chart, refusal

RANDOM_START = PRESETS["Learned (APE)"]
CONSTRUCTED = with_changes(RANDOM_START, init="constructed", steps=0)
DRIFT_STEPS, DRIFT_EVERY = 400, 20
GRADIENT_EVERY = 10
TRACE_SAMPLES = 256
L_TRAIN, OFFSET = RANDOM_START.task.train_length, RANDOM_START.task.offset
FAR = 4 * L_TRAIN
CHANCE = 1 / RANDOM_START.task.vocab_size
SHOWN_ROWS = 4 * L_TRAIN  # rows of the gradient map: the training range and three times as many past it
TRAINED_ON = with_changes(CONSTRUCTED, steps=DRIFT_STEPS, keep_training=True)


def _reports_table(start: str, reports: list[LengthReport], **columns) -> pd.DataFrame:
    return pd.DataFrame([{"start": start, **vars(r)} for r in reports]).assign(**columns)


@st.cache_data(show_spinner="Evaluating the constructed head…", max_entries=4)
def _constructed_reports(lengths: tuple[int, ...], samples: int) -> list[LengthReport]:
    check_single_head_evaluation(CONSTRUCTED, lengths, samples)  # this server's budgets
    return evaluate(initial_model(CONSTRUCTED), CONSTRUCTED, list(lengths), samples=samples)


@st.cache_data(show_spinner="Training with the gradient of every position row recorded…", max_entries=4)
def _trace(config_json: str, every: int) -> TrainingTrace:
    config = RunConfig.from_dict(json.loads(config_json))
    check_training(config)  # this server's budgets, for the training and the evaluations on the way
    check_single_head_evaluation(config, [L_TRAIN, FAR] * (config.train.steps // every + 2), TRACE_SAMPLES)
    return trace_training(config, every, (L_TRAIN, FAR), TRACE_SAMPLES)


def _traced(config: RunConfig, every: int) -> TrainingTrace:
    return _trace(json.dumps(config.to_dict(), sort_keys=True), every)


def _trace_table(start: str, trace: TrainingTrace) -> pd.DataFrame:
    column = trace.lengths.index(FAR)
    return pd.DataFrame([{"start": start, "step": step, **vars(reports[column])}
                         for step, reports in zip(trace.evaluation_steps, trace.evaluations, strict=True)])


def reach() -> None:
    """(a) The construction retrieves to the end of its table; the trained run is at chance past L_train."""
    try:
        built = _constructed_reports(START_LENGTHS, START_SAMPLES)
        trained = evaluation(RANDOM_START.run_id(), START_LENGTHS, START_SAMPLES)
    except ConfigError as error:  # over this server's budget (lengen_core.serving.budget)
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

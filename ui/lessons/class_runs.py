"""A lesson's `class-runs` element: the runs the class trained in this session (on the lesson's Train steps)
beside the step's presets, accuracy against length on one chart, so a question such as "will a different
seed learn the same rule?" is answered on the screen where it is asked.

Each run is read at the pages' default request (`request_lengths`, FIRST_VISIT_SAMPLES): the numbers a run
trained here is saved with (lengen.first_visit) and the presets ship with, so drawing them
measures nothing again; a run whose numbers are still being measured is measured here once (cached).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lengen.first_visit import FIRST_VISIT_SAMPLES, request_lengths
from lengen.presets import PRESETS
from ui.captions import accuracy as accuracy_captions
from ui.charts import compare as compare_charts
from ui.lessons.files import Step
from ui.runs import is_stored, load_run, measurement
from ui.training.live import CLASS_RUNS_KEY

MOST = 6  # the class's newest runs drawn, beside the presets: more lines than a projector's legend holds are noise


def class_runs(step: Step) -> dict[str, str]:
    """label -> run id: the step's presets, then this session's trained runs of the same task and model kind
    (single head), newest last, each named by its encoding and seed."""
    labels = {label: PRESETS[label].run_id() for label in step.presets}
    task = PRESETS[step.presets[0]].task
    trained = [run_id for run_id in st.session_state.get(CLASS_RUNS_KEY, [])
               if is_stored(run_id)]
    for run_id in trained[-MOST:]:
        config = load_run(run_id).config
        if config.single_head and config.task == task and run_id not in labels.values():
            labels[f"yours: {config.model.encoding}, seed {config.train.seed}"] = run_id
    return labels


def curves(labels: dict[str, str]) -> pd.DataFrame:
    """Accuracy with its 95% interval at the default request's lengths, one row per run and length."""
    rows = []
    for label, run_id in labels.items():
        run = load_run(run_id)
        m = measurement(run_id, tuple(request_lengths(run)), FIRST_VISIT_SAMPLES)
        rows.append(pd.DataFrame({"run_id": run_id, "run": label, "length": m.lengths, "samples": m.samples,
                                  "accuracy": [r.accuracy for r in m.reports],
                                  "accuracy_low": [r.accuracy_low for r in m.reports],
                                  "accuracy_high": [r.accuracy_high for r in m.reports]}))
    return pd.concat(rows, ignore_index=True)


def figure_and_caption(step: Step):
    """The overlay, its caption from the runs' own numbers, and its table; the caption says when the class has
    trained nothing yet in this session."""
    labels = class_runs(step)
    table = curves(labels)
    caption = accuracy_captions.curves_caption([
        accuracy_captions.run_curve(label, load_run(run_id).config, load_run(run_id).verdict,
                                    list(rows["length"]), list(rows["accuracy"]), list(rows["accuracy_low"]))
        for label, run_id in labels.items() for rows in [table[table["run_id"] == run_id]]],
        note=f"Bands: 95% Wilson intervals over {FIRST_VISIT_SAMPLES} sequences per length.")
    if len(labels) == len(step.presets):
        caption = (f"No run trained here in this session yet: train one on this lesson's Train steps and it is "
                   f"drawn here beside the presets. {caption}")
    chance = 1 / PRESETS[step.presets[0]].task.vocab_size
    figure = compare_charts.accuracy_overlay(table, chance).update_layout(title="Your runs beside the presets")
    return figure, str(caption), table

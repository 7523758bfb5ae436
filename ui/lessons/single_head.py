"""Lesson elements from the single-head pages' first charts: Start's accuracy against length for several
presets, Attention's map and argmax trace, Carrier's s(Δ) with its alignment and margin. Each draws the
page's chart with the page's cached analysis and its caption computed from the run (ui.lessons.elements)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lengen.presets import PRESETS, START_LENGTHS, START_SAMPLES
from ui.analyses import CARRIER_SEARCH
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import readouts
from ui.charts import common as charts
from ui.charts import compare as compare_charts
from ui.lessons.files import Step
from ui.lessons.frame import Projector, draw, preset_run
from ui.runs import allowed_lengths, carrier, evaluation, heatmap, load_run


def accuracy_overlay(step: Step, presenting: Projector | None) -> None:
    """The Start page's picture for the step's presets: accuracy against length, 95% Wilson bands."""
    reports = {label: evaluation(PRESETS[label].run_id(), START_LENGTHS, START_SAMPLES) for label in step.presets}
    curves = pd.concat([pd.DataFrame({
        "run": label, "length": START_LENGTHS, "samples": [r.samples for r in rows],
        "accuracy": [r.accuracy for r in rows], "accuracy_low": [r.accuracy_low for r in rows],
        "accuracy_high": [r.accuracy_high for r in rows]}) for label, rows in reports.items()])
    look_for = accuracy_captions.curves_caption([
        accuracy_captions.run_curve(label, PRESETS[label], load_run(PRESETS[label].run_id()).verdict, START_LENGTHS,
                                    [r.accuracy for r in rows], [r.accuracy_low for r in rows])
        for label, rows in reports.items()], note=f"Bands: 95% Wilson intervals over {START_SAMPLES} sequences per length.")
    chance = 1 / PRESETS[step.presets[0]].task.vocab_size
    figure = compare_charts.accuracy_overlay(curves, chance).update_layout(title="Accuracy against length")
    draw(figure, look_for, curves, "lesson-accuracy", "presets", presenting)


def attention_heatmap(step: Step, presenting: Projector | None) -> None:
    """One attention map at `multiple` × the training length, with the Attention page's trace caption."""
    run = preset_run(step)
    L_train, k = run.config.task.train_length, run.config.task.offset
    length = step.option("multiple") * L_train
    if length not in allowed_lengths(run.run_id, [length]):
        st.info(f"This run does not accept L = {length:,} (a learned table ends at {run.config.model.max_positions:,}).")
        return
    result = heatmap(run.run_id, length)
    expected = attention_captions.trace_expectation(run.config.model.encoding, run.config.model.attention)
    learned = None if run.verdict is None else run.verdict.learned
    trace = attention_captions.argmax_trace(result.argmax_keys, L_train, k)
    cells = result.weights.shape[0]
    draw(charts.attention_map(result.weights, result.pool, length, L_train),
          f"{attention_captions.trace_caption(trace, expected, learned, run.config.task.task == 'retrieval')} "
          f"Cells: {cells}×{cells}, pooling {result.pool}×{result.pool} (max).",
          pd.DataFrame(result.weights).rename_axis("query_cell").reset_index(), f"heatmap-{length}", run.run_id,
          presenting)


def argmax_trace(step: Step, presenting: Projector | None) -> None:
    """The key each query attends to most at `multiple` × the training length (the Attention page's trace)."""
    run = preset_run(step)
    L_train, k = run.config.task.train_length, run.config.task.offset
    length = step.option("multiple") * L_train
    result = heatmap(run.run_id, length)
    expected = attention_captions.trace_expectation(run.config.model.encoding, run.config.model.attention)
    draw(charts.argmax_trace(result.argmax_keys, L_train, k),
          attention_captions.trace_caption(attention_captions.argmax_trace(result.argmax_keys, L_train, k), expected,
                                           None if run.verdict is None else run.verdict.learned, True),
          pd.DataFrame({"query": np.arange(length), "argmax_key": result.argmax_keys}), f"argmax-{length}",
          run.run_id, presenting)


def carrier_chart(step: Step, presenting: Projector | None) -> None:
    """s(Δ) with its alignment and margin beside the untrained initialisation's (the Carrier page's)."""
    run = preset_run(step)
    result = carrier(run.run_id, CARRIER_SEARCH)
    trained, untrained = result.metrics, result.baseline
    a, b = st.columns(2)
    a.metric("Alignment", "yes" if trained.aligned else "no", delta=f"untrained: {'yes' if untrained.aligned else 'no'}",
             delta_color="off", delta_arrow="off")
    spread = result.baseline_range  # the range over untrained initialisations, as the Carrier page shows it
    b.metric("Margin at k (nats)", f"{trained.margin:+.2f}",
             delta=f"untrained: {readouts.untrained_text(untrained.margin, spread and spread.margin, '+.2f')}",
             delta_color="off", delta_arrow="off",
             help="s(k) minus the largest s(Δ) at any other offset of the training range.")
    draw(charts.carrier_curve(result.offsets, result.values, result.train_length, result.offset),
          readouts.carrier_caption(trained, untrained, result.offset,
                                   getattr(run.model.encoding, "trained_positions", False), run.verdict),
          pd.DataFrame({"offset": result.offsets, "s": result.values}), "carrier", run.run_id, presenting)


"""The elements a lesson step can show: each a renderer that draws one chart or control of the lab's pages
with the pages' own cached analyses (`ui.runs`, `ui.analyses`), chart builders (`ui.charts.common`,
`ui.charts.compare`, `ui.charts.transformer`) and captions computed from the run (`ui.captions.readouts`,
`ui.*_captions`). What each needs is declared in `ui.lessons.files.ELEMENTS`; `RENDERERS` has the same keys.

A renderer gets the step and, when the class is watching a projector, a `Projector` (charts sized to fit
the screen beside the step's text, each chart's caption written beside it, under the question); the
Train form also whether the class follows a students' link (`locked`: the settings the lesson fixes
cannot change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lengen_core.analysis.rules import parse_rule
from lengen_core.config import SETTINGS, ConfigError
from ui import delays as delay_view
from ui.analyses import CARRIER_SEARCH, dilution_look_for, head_attention, heads, length_multiples, sequence_evaluation
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import mechanism as mechanism_captions
from ui.captions import readouts
from ui.charts import common as charts
from ui.charts import compare as compare_charts
from ui.charts import transformer as transformer_charts
from ui.lessons import class_runs
from ui.lessons.files import Step
from lengen.presets import (
    DELAY_PRESETS,
    DILUTION_LONGEST,
    DILUTION_SAMPLES,
    POSITION_MULTIPLES,
    PRESETS,
    START_LENGTHS,
    START_SAMPLES,
    dilution_lengths,
)
from ui.reach import show_horizon
from ui.rules import view as rules_view
from ui.runs import allowed_lengths, carrier, dilution_data, evaluation, heatmap, load_run, measurement
from ui.training.form import request, show_message, train_form
from ui.training.live import TICKET_KEY, live_training, open_trained_run
from ui.training.pool import usable_pool
from ui.transformer import absolute
from ui.widgets import chart, refusal, run_summary

# Presenter mode, for a 1024×768 projector: the chart beside the step's text, as tall as what is left of the
# screen's 768 px under the step's bar and title and the run's summary and verdict; its title above it and its
# legend in a row over the plot, margins tight, its caption beside it. An element with more above its chart
# (metrics, a line of numbers) takes less.
PRESENT_HEIGHT = 480
PRESENT_LIVE_HEIGHT = 300  # each of a live training's four charts, two by two
LOCKED = tuple(SETTINGS)  # a students' link (lock=1) fixes every setting of the lesson's run, not only those it names
LIVE_CONFIG_KEY = "lesson_training_config"  # the config of the training this session asked for from a lesson
PRESENT_HEIGHTS = {"accuracy-overlay": 580, "class-runs": 580, "carrier-chart": 390, "horizon": 310, "inverse-mass-chart": 380}


@dataclass(frozen=True)
class Projector:
    """A step on a projector: `notes` is the container beside the chart, where its caption goes; `height` the
    chart's height in px."""

    notes: DeltaGenerator | None  # None: the caption under the chart
    height: int = PRESENT_HEIGHT


def _draw(figure: go.Figure, look_for: str, data: pd.DataFrame, name: str, stem: str,
          presenting: Projector | None) -> None:
    chart(figure, look_for, data, name, stem, notes=presenting.notes if presenting else None,
          height=presenting.height if presenting else None)


def _run(step: Step):
    run = load_run(PRESETS[step.presets[0]].run_id())
    run_summary(run)
    return run


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
    _draw(figure, look_for, curves, "lesson-accuracy", "presets", presenting)


def attention_heatmap(step: Step, presenting: Projector | None) -> None:
    """One attention map at `multiple` × the training length, with the Attention page's trace caption."""
    run = _run(step)
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
    _draw(charts.attention_map(result.weights, result.pool, length, L_train),
          f"{attention_captions.trace_caption(trace, expected, learned, run.config.task.task == 'retrieval')} "
          f"Cells: {cells}×{cells}, pooling {result.pool}×{result.pool} (max).",
          pd.DataFrame(result.weights).rename_axis("query_cell").reset_index(), f"heatmap-{length}", run.run_id,
          presenting)


def argmax_trace(step: Step, presenting: Projector | None) -> None:
    """The key each query attends to most at `multiple` × the training length (the Attention page's trace)."""
    run = _run(step)
    L_train, k = run.config.task.train_length, run.config.task.offset
    length = step.option("multiple") * L_train
    result = heatmap(run.run_id, length)
    expected = attention_captions.trace_expectation(run.config.model.encoding, run.config.model.attention)
    _draw(charts.argmax_trace(result.argmax_keys, L_train, k),
          attention_captions.trace_caption(attention_captions.argmax_trace(result.argmax_keys, L_train, k), expected,
                                           None if run.verdict is None else run.verdict.learned, True),
          pd.DataFrame({"query": np.arange(length), "argmax_key": result.argmax_keys}), f"argmax-{length}",
          run.run_id, presenting)


def carrier_chart(step: Step, presenting: Projector | None) -> None:
    """s(Δ) with its alignment and margin beside the untrained initialisation's (the Carrier page's)."""
    run = _run(step)
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
    _draw(charts.carrier_curve(result.offsets, result.values, result.train_length, result.offset),
          readouts.carrier_caption(trained, untrained, result.offset,
                                   getattr(run.model.encoding, "trained_positions", False), run.verdict),
          pd.DataFrame({"offset": result.offsets, "s": result.values}), "carrier", run.run_id, presenting)


def _dilution(step: Step):
    """The Dilution page's table at its default samples, up to the step's `longest`, and the fitted law."""
    run = _run(step)
    lengths = tuple(allowed_lengths(run.run_id, list(dilution_lengths(run.config, min(step.option("longest"),
                                                                                         DILUTION_LONGEST)))))
    data = dilution_data(run.run_id, lengths, DILUTION_SAMPLES)
    table, fit_table, result = data.table, data.fit_table, data.result
    return run, lengths, table, fit_table, result


def dilution_chart(step: Step, presenting: Projector | None) -> None:
    run, _, table, fit_table, _ = _dilution(step)
    task = run.config.task
    _draw(charts.dilution(table, fit_table, 1 / task.vocab_size),
          dilution_look_for(run, table),
          table, "dilution", run.run_id, presenting)


def inverse_mass_chart(step: Step, presenting: Projector | None) -> None:
    run, lengths, table, fit_table, result = _dilution(step)
    law = readouts.fit_caption(result)
    if presenting is None:
        st.caption(f"**m_out: {accuracy_captions.m_out_text(result, DILUTION_SAMPLES)}.** {law}")
    else:  # a projector: the number, and the fit's account one click away
        st.caption(f"**m_out: {accuracy_captions.m_out_text(result, DILUTION_SAMPLES)}.**")
        st.expander("How the law was fitted").caption(law)
    _draw(charts.inverse_mass(table, fit_table),
          readouts.inverse_mass_caption(lengths, table["target_mass"], run.config.task.train_length, result),
          table[["length", "samples", "target_mass", "target_mass_sem", "predicted_mass"]]
          .assign(inverse_mass=1 / table["target_mass"]), "inverse-mass", run.run_id, presenting)


def horizon(step: Step, presenting: Projector | None) -> None:
    """The measured and predicted horizon (with Train longer, but in presenter mode), under the accuracy it
    is read from. On a projector the horizon's caption goes beside the chart and the chart's under it."""
    run, lengths, table, _, _ = _dilution(step)
    show_horizon(run, measurement(run.run_id, lengths, DILUTION_SAMPLES), controls=not presenting,  # cached
                 notes=presenting.notes if presenting else None)
    _draw(charts.dilution(  # the accuracy the horizon is read from, without the law
        table, None, 1 / run.config.task.vocab_size),
        dilution_look_for(run, table),
        table, "horizon-accuracy", run.run_id, presenting and replace(presenting, notes=None))


def head_carriers(step: Step, presenting: Projector | None) -> None:
    """Every head's carrier in a transformer, carrier heads and pinned heads marked (the Transformer page's)."""
    run = _run(step)
    model, k = run.config.model, run.config.task.offset
    reports = heads(run.run_id)
    carriers = transformer_charts.carrier_table(reports)
    _draw(transformer_charts.head_grid(carriers, model.n_layers, model.n_heads, k),
          mechanism_captions.head_grid_caption(reports, model.encoding, model.attention,
                                               None if run.verdict is None else run.verdict.learned),
          carriers, "head-carriers", run.run_id, presenting)


def head_attention_map(step: Step, presenting: Projector | None) -> None:
    """The carrier head's attention (the strongest head when none carries) at `multiple` × the training length."""
    run = _run(step)
    L_train, k = run.config.task.train_length, run.config.task.offset
    reports = heads(run.run_id)
    best = max(reports, key=lambda h: (h.is_carrier, h.target_weight))
    length = step.option("multiple") * L_train
    weights = head_attention(run.run_id, length, best.layer, best.head)
    name = f"L{best.layer} H{best.head}"
    _draw(transformer_charts.head_attention(weights, length, L_train, f"{name} at L = {length}"),
          f"{name}: " + attention_captions.trace_caption(attention_captions.weights_trace(weights, L_train, k), None,
                                                        None if run.verdict is None else run.verdict.learned,
                                                        last_query_only=False) + " Mean |weight| over 16 sequences.",
          pd.DataFrame(weights).rename_axis("query").reset_index(), f"head-attention-{length}", run.run_id, presenting)


def accuracy_by_position(step: Step, presenting: Projector | None) -> None:
    """A transformer's accuracy at every position of sequences 4× the training length (the Transformer page's)."""
    run = _run(step)
    task, samples = run.config.task, 64
    evaluated = sequence_evaluation(run.run_id, length_multiples(run.run_id, POSITION_MULTIPLES), samples)
    table, longest = transformer_charts.position_table(evaluated), evaluated[-1]
    _draw(transformer_charts.accuracy_by_position(table, task.train_length, 1 / task.vocab_size),
          accuracy_captions.position_caption(longest.positions, longest.accuracy_by_position, longest.length,
                                             task.train_length, 1 / task.vocab_size, samples,
                                             run.config.model.encoding, run.config.model.attention,
                                             None if run.verdict is None else run.verdict.learned),
          table, "accuracy-by-position", run.run_id, presenting)


def position_probe(step: Step, presenting: Projector | None) -> None:
    """The position probe of each layer against its untrained seeds, at 1× and 4× L_train (the Transformer page's)."""
    run = _run(step)
    found, refused = absolute.probes(run)
    if refused:
        raise refused[0]
    _draw(*absolute.probe_chart(found), "absolute-probe", run.run_id, presenting)


def train(step: Step, presenting: Projector | None, locked: bool = False) -> None:
    """The Train form holding the lesson's run (in presenter mode only the settings the lesson sets, beside the
    live view; on a students' link every setting fixed: the lesson's config is the whole run), the live view
    of a training started here, from the untrained model to the last frame, which stays with the run's verdict
    once it ends, and the message it leaves."""
    if (pool := usable_pool()) is None:  # its cluster is out of reach: said in its place
        return
    with presenting.notes if presenting else st.container():
        choice = train_form(step.config, shown=step.fixed if presenting else None,
                            locked=LOCKED if locked else (), pace=step.pace)
        if choice is not None and choice.submitted:
            st.session_state[LIVE_CONFIG_KEY] = choice.config  # what the live view draws until it ends
            request(pool, choice.config, choice.pace)
        show_message()
        held = step.config if choice is None else choice.config
    open_trained_run(held, present=presenting is not None)  # the form's run, once stored and not live: on top
    live = st.session_state.get(LIVE_CONFIG_KEY, held) if TICKET_KEY in st.session_state else held
    live_training(pool, PRESENT_LIVE_HEIGHT if presenting else None, live)


def class_runs_chart(step: Step, presenting: Projector | None) -> None:
    """The runs this session trained on the lesson's Train steps beside the step's presets (ui.lessons.class_runs)."""
    figure, look_for, table = class_runs.figure_and_caption(step)
    _draw(figure, look_for, table, "class-runs", "lesson", presenting)


def rules_chart(step: Step, presenting: Projector | None) -> None:
    """Accuracy under the step's inference rules beside the unmodified run (the Dilution page's rules chart)."""
    run = _run(step)
    labels = ["none", *(parse_rule(part).label for part in step.option("rules").split(","))]
    lengths = tuple(allowed_lengths(run.run_id, list(dilution_lengths(run.config, step.option("longest")))))
    try:
        _, table, effects = rules_view.under_rules(run, labels, lengths, DILUTION_SAMPLES)
    except ConfigError as error:  # over this server's budget
        refusal("The rules are not evaluated here", error)
        return
    _draw(rules_view.accuracy_chart(table, 1 / run.config.task.vocab_size), effects, table, "rules-accuracy",
          run.run_id, presenting)


def _delay_run(step: Step):
    run = load_run(DELAY_PRESETS[step.presets[0]].run_id())
    run_summary(run)
    return run


def delay_overlay(step: Step, presenting: Projector | None) -> None:
    """Accuracy against the delay of the step's delay presets on one chart (the Delays page's curves)."""
    curves = {label: delay_view.curve(DELAY_PRESETS[label].run_id()) for label in step.presets}
    _draw(delay_view.overlay_figure(curves), delay_view.overlay_caption(curves), delay_view.overlay_table(curves),
          "lesson-delays", "delay-presets", presenting)


def delay_curve(step: Step, presenting: Projector | None) -> None:
    """One delay preset's accuracy and attention on the source against the delay, with the Delays page's caption."""
    run = _delay_run(step)
    result = delay_view.curve(run.run_id)
    _draw(delay_view.delay_figure(result), delay_view.delay_caption(run, result), delay_view.curve_table(result),
          "delays", run.run_id, presenting)


def delay_diversity(step: Step, presenting: Projector | None) -> None:
    """The shipped data-diversity sweep (the Delays page's second chart)."""
    sweep = delay_view.preset_diversity()
    if sweep is None:
        st.info("The shipped diversity sweep is missing from this installation.")
        return
    table = delay_view.diversity_table(sweep.cells)
    _draw(delay_view.diversity_figure(table), delay_view.diversity_caption(table), table, "delay-diversity",
          sweep.sweep_id, presenting)


def delay_transfer(step: Step, presenting: Projector | None) -> None:
    """The Delays page's transfer form on a delay preset: measured on a click, not on the way through the lesson."""
    delay_view.transfer_section(_delay_run(step))


RENDERERS: dict[str, Callable[..., None]] = {
    "accuracy-overlay": accuracy_overlay, "heatmap": attention_heatmap, "argmax-trace": argmax_trace,
    "carrier-chart": carrier_chart, "dilution-chart": dilution_chart, "inverse-mass-chart": inverse_mass_chart,
    "horizon": horizon, "head-carriers": head_carriers, "head-attention": head_attention_map,
    "accuracy-by-position": accuracy_by_position, "position-probe": position_probe, "train-form": train,
    "class-runs": class_runs_chart,
    "rules-chart": rules_chart, "delay-overlay": delay_overlay, "delay-curve": delay_curve,
    "delay-diversity": delay_diversity, "delay-transfer": delay_transfer,
}


def render(step: Step, locked: bool, notes: DeltaGenerator | None = None) -> None:
    """Draw the step's element (for a projector when `notes` is given: the container beside the chart for its
    caption); a request this server refuses (over a budget) is a message in its place."""
    presenting = None if notes is None else Projector(notes, PRESENT_HEIGHTS.get(step.element, PRESENT_HEIGHT))
    try:
        if step.element == "train-form":
            train(step, presenting, locked)
        else:
            RENDERERS[step.element](step, presenting)
    except ConfigError as error:
        refusal("Not shown on this server", error)

"""Lesson elements from the Delays page, on its delay presets: several presets' accuracy against the delay,
one preset's curve with attention on the source, the shipped data-diversity sweep, and the transfer form
(ui.lessons.elements)."""

from __future__ import annotations

import streamlit as st

from lengen.api import Run
from lengen.presets import DELAY_PRESETS
from ui import delays as delay_view
from ui.lessons.files import Step
from ui.lessons.frame import Projector, draw
from ui.runs import load_run
from ui.widgets import run_summary


def _delay_run(step: Step) -> Run:
    run = load_run(DELAY_PRESETS[step.presets[0]].run_id())
    run_summary(run)
    return run


def delay_overlay(step: Step, presenting: Projector | None) -> None:
    """Accuracy against the delay of the step's delay presets on one chart (the Delays page's curves)."""
    curves = {label: delay_view.curve(DELAY_PRESETS[label].run_id()) for label in step.presets}
    draw(delay_view.overlay_figure(curves), delay_view.overlay_caption(curves), delay_view.overlay_table(curves),
          "lesson-delays", "delay-presets", presenting)


def delay_curve(step: Step, presenting: Projector | None) -> None:
    """One delay preset's accuracy and attention on the source against the delay, with the Delays page's caption."""
    run = _delay_run(step)
    result = delay_view.curve(run.run_id)
    draw(delay_view.delay_figure(result), delay_view.delay_caption(run, result), delay_view.curve_table(result),
          "delays", run.run_id, presenting)


def delay_diversity(step: Step, presenting: Projector | None) -> None:
    """The shipped data-diversity sweep (the Delays page's second chart)."""
    sweep = delay_view.preset_diversity()
    if sweep is None:
        st.info("The shipped diversity sweep is missing from this installation.")
        return
    table = delay_view.diversity_table(sweep.cells)
    draw(delay_view.diversity_figure(table), delay_view.diversity_caption(table), table, "delay-diversity",
          sweep.sweep_id, presenting)


def delay_transfer(step: Step, presenting: Projector | None) -> None:
    """The Delays page's transfer form on a delay preset: measured on a click, not on the way through the lesson."""
    delay_view.transfer_section(_delay_run(step))


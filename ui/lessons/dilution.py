"""Lesson elements from the Dilution page: its accuracy chart with the fitted law, 1/p against length, the
measured and predicted horizon, and accuracy under inference rules, each from the page's table at its default
samples up to the step's `longest` (ui.lessons.elements)."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from lengen.api import parse_rule
from lengen.presets import DILUTION_LONGEST, DILUTION_SAMPLES, dilution_lengths
from lengen_core.config import ConfigError
from ui.analyses import dilution_look_for
from ui.captions import accuracy as accuracy_captions
from ui.captions import readouts
from ui.charts import common as charts
from ui.lessons.files import Step
from ui.lessons.frame import Projector, draw, preset_run
from ui.reach import show_horizon
from ui.rules import view as rules_view
from ui.runs import allowed_lengths, dilution_data, measurement
from ui.widgets import refusal


def _dilution(step: Step):
    """The Dilution page's table at its default samples, up to the step's `longest`, and the fitted law."""
    run = preset_run(step)
    lengths = tuple(allowed_lengths(run.run_id, list(dilution_lengths(run.config, min(step.option("longest"),
                                                                                         DILUTION_LONGEST)))))
    data = dilution_data(run.run_id, lengths, DILUTION_SAMPLES)
    table, fit_table, result = data.table, data.fit_table, data.result
    return run, lengths, table, fit_table, result


def dilution_chart(step: Step, presenting: Projector | None) -> None:
    run, _, table, fit_table, _ = _dilution(step)
    task = run.config.task
    draw(charts.dilution(table, fit_table, 1 / task.vocab_size),
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
    draw(charts.inverse_mass(table, fit_table),
          readouts.inverse_mass_caption(lengths, table["target_mass"], run.config.task.train_length, result),
          table[["length", "samples", "target_mass", "target_mass_sem", "predicted_mass"]]
          .assign(inverse_mass=1 / table["target_mass"]), "inverse-mass", run.run_id, presenting)


def horizon(step: Step, presenting: Projector | None) -> None:
    """The measured and predicted horizon (with Train longer, but in presenter mode), under the accuracy it
    is read from. On a projector the horizon's caption goes beside the chart and the chart's under it."""
    run, lengths, table, _, _ = _dilution(step)
    show_horizon(run, measurement(run.run_id, lengths, DILUTION_SAMPLES), controls=not presenting,  # cached
                 notes=presenting.notes if presenting else None)
    draw(charts.dilution(  # the accuracy the horizon is read from, without the law
        table, None, 1 / run.config.task.vocab_size),
        dilution_look_for(run, table),
        table, "horizon-accuracy", run.run_id, presenting and replace(presenting, notes=None))


def rules_chart(step: Step, presenting: Projector | None) -> None:
    """Accuracy under the step's inference rules beside the unmodified run (the Dilution page's rules chart)."""
    run = preset_run(step)
    labels = ["none", *(parse_rule(part).label for part in step.option("rules").split(","))]
    lengths = tuple(allowed_lengths(run.run_id, list(dilution_lengths(run.config, step.option("longest")))))
    try:
        _, table, effects = rules_view.under_rules(run, labels, lengths, DILUTION_SAMPLES)
    except ConfigError as error:  # over this server's budget
        refusal("The rules are not evaluated here", error)
        return
    draw(rules_view.accuracy_chart(table, 1 / run.config.task.vocab_size), effects, table, "rules-accuracy",
          run.run_id, presenting)


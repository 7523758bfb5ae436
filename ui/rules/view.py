"""Inference rules on the Dilution and Compare pages: the chosen rules' curves beside the unmodified run,
measured and predicted from the weights, with each rule's effective margin and horizon (issue 17).

Each section prices the whole request before any work (`ui.rules.runs.price`), then measures every
rule under one bar; a rule undefined for one of the compared runs is skipped for that run, with the
core's reason. The Carrier and Attention sections are in `ui.rules.maps`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lengen_core.analysis.rules import CARRIER_RULES, RULES, parse_rule
from lengen_core.config import ConfigError, RunConfig
from lengen_core.measure import Measurement
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import Run
from ui import widgets
from ui.rules import captions as rule_captions
from ui.rules import charts as rule_charts
from ui.rules import runs as rule_runs
from ui.rules.captions import BELOW, UP_TO, RuleCurve
from ui.rules.select import rule_selector, why_rule_undefined
from ui.rules.shipped import shipped_measurement
from ui.runs import Progress, load_run
from ui.state import plain

INTRO = ("Length-aware inference rules change how the trained weights are read at a longer length, with no "
         f"retraining: the logits ({', '.join(n for n, r in RULES.items() if r.changes == 'logits')}) or the "
         f"carrier ({', '.join(CARRIER_RULES)}). Each is drawn beside the unmodified run (none), measured (solid, "
         "with its 95% band) and predicted from the weights (dashed).")


def _measure(run_id: str, label: str, lengths: tuple[int, ...], samples: int,
             progress: Progress) -> tuple[RuleCurve, Measurement]:
    """The run's measurement under the rule (`ui.rules.runs.ruled_measurement`: the command line's
    `evaluate --rule`), as a curve; the law and the horizons stay in the measurement. A preset's shipped
    measurement of this very request (`ui.rules.shipped`: the lesson's steps, the Dilution page's defaults)
    is read instead."""
    m = shipped_measurement(load_run(run_id), label, lengths, samples) or \
        rule_runs.ruled_measurement(run_id, label, lengths, samples, progress)
    reports, predicted = m.reports, m.predictions if m.closed_form else None
    curve = RuleCurve(label, list(lengths), [r.accuracy for r in reports], [r.accuracy_low for r in reports],
                      [r.accuracy_high for r in reports], [r.target_mass for r in reports],
                      None if predicted is None else [p.accuracy for p in predicted],
                      None if predicted is None else [p.target_mass for p in predicted])
    return curve, m


def _table(run: str, curves: list[RuleCurve], samples: int) -> pd.DataFrame:
    nan = [float("nan")]
    return pd.concat([pd.DataFrame({
        "run": run, "rule": c.rule, "length": c.lengths, "samples": samples, "accuracy": c.accuracy,
        "accuracy_low": c.accuracy_low, "accuracy_high": c.accuracy_high, "target_mass": c.target_mass,
        "predicted_accuracy": c.predicted_accuracy or nan * len(c.lengths),
        "predicted_mass": c.predicted_mass or nan * len(c.lengths)}) for c in curves], ignore_index=True)


def _rows(run: str, config: RunConfig, single_head: bool,
          measured: dict[str, tuple[RuleCurve, Measurement]]) -> tuple[list[dict], list[str]]:
    """One row per rule, and the sentences saying why a rule has no law (prefixed by the run on Compare)."""
    rows, laws, L = [], [], config.task.train_length
    for label, (curve, m) in measured.items():
        refused = None  # a horizon search over this server's budget: said in the table, the rest is shown
        if m.predicted_horizon is None and m.horizon_note is not None:
            refused = m.horizon_note.removeprefix("not computed here: ")
        cell, why = rule_captions.law_cell(m.fit, curve, L)
        if why is not None and single_head:
            laws.append(why if run == "this run" else f"**{plain(run)}**: {why}")
        rows.append({"run": run, "rule": label, "changes": parse_rule(label).changes,
                     "longest L": curve.lengths[-1], "accuracy there": curve.accuracy[-1],
                     "p there": curve.target_mass[-1], "m_out (95%)": cell,
                     **cells(rule_captions.measured_cells(curve.lengths, curve.accuracy, L), "measured"),
                     **cells(rule_captions.horizon_cells(m.predicted_horizon, refused) if single_head
                             else ("n/a (transformer)", "n/a (transformer)"), "predicted")})
    return rows, laws


def cells(pair: tuple[str, str], how: str) -> dict[str, str]:
    """A horizon's two cells under their column names: 'accuracy ≥ 0.9 up to, measured', …"""
    return {f"{UP_TO}, {how}": pair[0], f"{BELOW}, {how}": pair[1]}


def _numbers(rows: list[dict], laws: list[str], one_run: bool) -> None:
    """The table of each rule's numbers (no run column for one run), then why a rule has no law."""
    table = pd.DataFrame(rows).drop(columns=["run"] if one_run else [])
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "longest L": st.column_config.NumberColumn(format="%d", help="The longest length measured."),
        "accuracy there": st.column_config.NumberColumn(format="%.3f", help="Measured accuracy at the longest L."),
        "p there": st.column_config.NumberColumn(format="%.3g", help="Measured target mass at the longest L."),
        "m_out (95%)": st.column_config.TextColumn(help="The dilution law's effective margin fitted to the numbers "
                                                        "measured under the rule, far keys weighed by its prediction, "
                                                        "with a 95% bootstrap interval; a sentence where the law "
                                                        "does not describe the run under it."),
        f"{UP_TO}, measured": st.column_config.TextColumn(
            help=f"The longest measured length whose accuracy is still ≥ {ACCURACY_BAR:g} under the rule (tokens)."),
        f"{BELOW}, measured": st.column_config.TextColumn(
            help=f"The first measured length past it where accuracy is below {ACCURACY_BAR:g}."),
        f"{UP_TO}, predicted": st.column_config.TextColumn(
            help=f"The largest length whose accuracy predicted from the weights is ≥ {ACCURACY_BAR:g} under the rule, "
                 "looked for up to the longest length measured (for none, as trained: up to 2^20 tokens or the end "
                 "of a learned table, as above)."),
        f"{BELOW}, predicted": st.column_config.TextColumn(
            help="The length by which the predicted accuracy has fallen below it: the search pins the edge between "
                 "these two lengths."),
    })
    if laws:
        st.caption(" ".join(laws))


def under_rules(run: Run, labels: Sequence[str], lengths: Sequence[int], samples: int):
    """One run measured under each rule of `labels` (the first none), priced first (ConfigError if over):
    each rule's measurement, the rules' table, and the sentence saying what each rule did to accuracy."""
    lengths, task = tuple(lengths), run.config.task
    rule_runs.price(run.run_id, labels[1:], lengths, samples)
    with Progress("Reading under the rules", runs=len(labels), unit="rule") as progress:
        measured = {}
        for label in labels:
            measured[label] = _measure(run.run_id, label, lengths, samples, progress)
            progress.next_run()
    curves = [curve for curve, _ in measured.values()]
    learned = None if run.verdict is None else run.verdict.learned
    effects = " ".join(rule_captions.effect(c, curves[0], task.train_length, 1 / task.vocab_size, task.offset,
                                            learned) for c in curves[1:])
    return measured, _table("this run", curves, samples), effects


def accuracy_chart(table: pd.DataFrame, chance: float) -> go.Figure:
    """Accuracy under each rule of `under_rules`' table, measured and predicted, chance dotted."""
    return rule_charts.by_rule(table, "accuracy", "predicted_accuracy", "Accuracy under each rule", "accuracy", chance)


def dilution_rules(run: Run, lengths: Sequence[int], samples: int) -> None:
    """The Dilution page's rules: a selector, two charts and a table, for the selected run."""
    st.subheader("Inference rules: the same weights read another way")
    st.markdown(INTRO)
    rules = rule_selector("dilution-rules", {"this run": run.config})
    if not rules:
        return
    try:
        measured, table, effects = under_rules(run, ["none", *(r.label for r in rules)], lengths, samples)
    except ConfigError as error:
        widgets.refusal("The rules are not evaluated here", error)
        return
    widgets.chart(accuracy_chart(table, 1 / run.config.task.vocab_size), effects, table, "rules-accuracy",
                  run.run_id)
    tracked = "; ".join(filter(None, (rule_captions.tracking(curve) for curve, _ in measured.values())))
    widgets.chart(rule_charts.by_rule(table, "target_mass", "predicted_mass", "Target mass p under each rule",
                                      "target mass p"),
                  f"measured (solid) against predicted from the weights before any measurement (dashed): {tracked}.",
                  table, "rules-mass", run.run_id)
    _numbers(*_rows("this run", run.config, True, measured), one_run=True)


def compare_rules(labels: dict[str, str], runs: dict[str, Run], lengths: dict[str, tuple[int, ...]],
                  samples: int) -> None:
    """The Compare page's rules: each compared run under each chosen rule, a panel per run."""
    st.subheader("Inference rules on each run")
    st.markdown(INTRO)
    rules = rule_selector("compare-rules", {labels[i]: run.config for i, run in runs.items()})
    if not rules:
        return
    plan: dict[str, list[str]] = {}
    for run_id, run in runs.items():
        plan[run_id] = ["none"]
        for rule in rules:
            why = why_rule_undefined(rule, run.config)
            if why is None:
                plan[run_id].append(rule.label)
            else:
                st.caption(f"**{plain(labels[run_id])}**: {rule.label} skipped: {plain(why)}.")
    try:
        for run_id, chosen in plan.items():
            rule_runs.price(run_id, chosen[1:], lengths[run_id], samples)
    except ConfigError as error:
        widgets.refusal("The rules are not evaluated here", error)
        return
    tables, rows, laws, curves = [], [], [], {}
    with Progress("Reading under the rules", runs=sum(map(len, plan.values())), unit="run and rule") as progress:
        for run_id, chosen in plan.items():
            single = runs[run_id].config.single_head
            measured = {}
            for label in chosen:
                measured[label] = _measure(run_id, label, lengths[run_id], samples, progress)
                progress.next_run()
            curves[run_id] = [curve for curve, _ in measured.values()]
            tables.append(_table(labels[run_id], curves[run_id], samples))
            found_rows, found_laws = _rows(labels[run_id], runs[run_id].config, single, measured)
            rows, laws = rows + found_rows, laws + found_laws
    table = pd.concat(tables, ignore_index=True)
    chance = min(1 / run.config.task.vocab_size for run in runs.values())
    effects, tracked = [], []
    for run_id, found in curves.items():
        task, name, verdict = runs[run_id].config.task, plain(labels[run_id]), runs[run_id].verdict
        effects += [f"{name}: " + rule_captions.effect(c, found[0], task.train_length, 1 / task.vocab_size, task.offset,
                                                       None if verdict is None else verdict.learned)
                    for c in found[1:]]
        tracked += [f"{name}, {text}" for text in filter(None, map(rule_captions.tracking, found))]
    widgets.chart(rule_charts.by_rule(table, "accuracy", "predicted_accuracy", "Accuracy under each rule, per run",
                                      "accuracy", chance), " ".join(effects) or "only the unmodified runs are drawn.",
                  table, "compare-rules-accuracy")
    widgets.chart(rule_charts.by_rule(table, "target_mass", "predicted_mass", "Target mass p under each rule, per run",
                                      "target mass p"),
                  "measured (solid) against predicted from the weights before any measurement (dashed; single-head "
                  f"runs only): {'; '.join(tracked) or 'no run here has a prediction'}.", table, "compare-rules-mass")
    _numbers(rows, laws, one_run=False)


"""Plotly builders for inference rules (lengen_core.analysis.rules): one colour per rule, the unmodified run (none)
first; measured solid with its 95% Wilson band, predicted from the weights dashed in the same colour.
Several runs (Compare) are side-by-side panels of one figure, the rules keeping their colours in each.

Plain data in, a figure out: long tables with columns `run`, `rule`, `length`, the measured and the
predicted values (NaN where nothing was predicted: a transformer).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ui.charts.common import REFERENCE, _layout, accuracy_hover, band, chance_line, hover, log_axis

PALETTE = ["#444444", *qualitative.D3]  # none in dark grey, every rule in a colour of its own
PANELS_A_ROW = 3


def rule_colours(rules: list[str]) -> dict[str, str]:
    return {rule: PALETTE[i % len(PALETTE)] for i, rule in enumerate(rules)}


def _panels(runs: list[str], height: int) -> tuple[go.Figure, int]:
    columns = min(PANELS_A_ROW, len(runs))
    rows = -(-len(runs) // columns)
    figure = make_subplots(rows=rows, cols=columns, shared_yaxes=True, horizontal_spacing=0.04,
                           vertical_spacing=0.16, subplot_titles=runs if len(runs) > 1 else None)
    return figure.update_layout(height=height + (rows - 1) * 300), columns


def by_rule(table: pd.DataFrame, measured: str, predicted: str, title: str, y_title: str,
            chance: float | None = None) -> go.Figure:
    """`measured` (solid, markers; with its Wilson band where the table has `{measured}_low/_high`) and
    `predicted` (dashed) against length, one colour per rule, one panel per run."""
    runs, rules = list(dict.fromkeys(table["run"])), list(dict.fromkeys(table["rule"]))
    colours = rule_colours(rules)
    figure, columns = _panels(runs, 460)
    for i, run in enumerate(runs):
        where = dict(row=i // columns + 1, col=i % columns + 1)
        for rule in rules:
            rows = table[(table["run"] == run) & (table["rule"] == rule)]
            if rows.empty:
                continue
            colour, first = colours[rule], i == 0
            if {f"{measured}_low", f"{measured}_high"} <= set(rows.columns):
                band(figure, rows["length"], rows[f"{measured}_low"], rows[f"{measured}_high"], colour,
                     f"{rule} (95% interval)", legendgroup=rule, showlegend=False, **where)
            customdata, template = accuracy_hover(rows) if measured == "accuracy" else (
                rows[["samples"]].to_numpy(), hover("L = %{x:,}", "p %{y:.3g}", "n = %{customdata[0]:,} sequences"))
            figure.add_scatter(x=rows["length"], y=rows[measured], mode="markers+lines", name=f"{rule} measured",
                               line=dict(color=colour, width=2.5), marker_size=6, legendgroup=rule, showlegend=first,
                               customdata=customdata, hovertemplate=template, **where)
            if rows[predicted].notna().any():
                figure.add_scatter(x=rows["length"], y=rows[predicted], mode="lines", name=f"{rule} predicted",
                                   line=dict(color=colour, dash="dash", width=2), legendgroup=rule, showlegend=first,
                                   hovertemplate=hover("L = %{x:,}", "predicted %{y:.3f} (from the weights)"), **where)
        if chance is not None:  # labelled once, right of the first row's last panel
            chance_line(figure, chance, dash="dot", label=i == columns - 1, **where)
        log_axis(figure, "x", table["length"], **where)
    figure.update_yaxes(range=[0, 1.05])
    height = figure.layout.height
    figure = _layout(figure, title, "test length L (log)" if len(runs) == 1 else None, None, height=height)
    figure.update_yaxes(title_text=y_title, col=1)
    if len(runs) > 1:
        figure.update_xaxes(title_text="test length L (log)")
    return figure


def carrier_by_rule(table: pd.DataFrame, train_length: int, offset: int, peaks: dict[str, tuple[int, float]],
                    length: int) -> go.Figure:
    """s(Δ) at Δ = 0 … L − 1 of the unmodified run and under each rule (columns rule, offset, s), the
    training range shaded, k marked, and each rule's peak marked where it moved to (`peaks`: rule → (Δ, s))."""
    rules = list(dict.fromkeys(table["rule"]))
    colours = rule_colours(rules)
    figure = go.Figure()
    for rule in rules:
        rows = table[table["rule"] == rule]
        figure.add_scatter(x=rows["offset"], y=rows["s"], mode="lines", name=f"s(Δ) {rule}",
                           line=dict(color=colours[rule], width=2.5 if rule == "none" else 2),
                           hovertemplate=hover("Δ = %{x:,}", "s(Δ) = %{y:.3f} nats"))
    labelled: set[int] = set()
    for rule, (at, value) in peaks.items():  # a star for each; a label only where no earlier peak has one
        text = None if at in labelled else f"{rule} peak Δ = {at:,}"
        labelled.add(at)
        figure.add_scatter(x=[at], y=[value], mode="markers+text", name=f"peak {rule}: Δ = {at:,}",
                           marker=dict(color=colours[rule], size=13, symbol="star", line=dict(width=1, color="black")),
                           text=[text], textposition="top right", textfont=dict(color=colours[rule]),
                           hovertemplate=hover(f"{rule}: peak at Δ = %{{x:,}}", "s = %{y:.3f} nats"))
    figure.add_vrect(x0=-0.5, x1=train_length - 0.5, fillcolor=REFERENCE, opacity=0.15, line_width=0,
                     annotation_text="training range", annotation_position="bottom right")
    figure.add_vline(x=offset, line=dict(color="red", dash="dash"), annotation_text=f"k = {offset}",
                     annotation_position="top left")
    values = table["s"].to_numpy()
    pad = 0.08 * (np.nanmax(values) - np.nanmin(values) or 1.0)
    figure.update_yaxes(range=[float(np.nanmin(values) - pad), float(np.nanmax(values) + 3 * pad)])
    figure.update_xaxes(range=[-0.5, length - 0.5])
    return _layout(figure, f"Carrier s(Δ) read at L = {length:,}, unmodified and under each rule",
                   "offset Δ = t − u", "s(Δ) (nats)", height=460)

"""Plotly builder for the Theory page's equivariance check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.charts.common import MEASURED, REFERENCE, _layout, hover, log_axis

FLOOR = 1e-12  # an exact zero (the unshifted pair) drawn at the bottom of the log axis


def equivariance(table: pd.DataFrame, tolerance: float) -> go.Figure:
    """Max |Δ logit| against the shift s, both on log axes; shifts beyond a position table are left out."""
    shown = table[(table["shift"] > 0) & table["max_abs_difference"].notna()]
    figure = go.Figure(go.Scatter(
        x=shown["shift"], y=np.maximum(shown["max_abs_difference"], FLOOR), mode="markers+lines",
        name="max |logit(t+s, u+s) − logit(t, u)|", marker=dict(size=9, color=MEASURED),
        hovertemplate=hover("shift s = %{x:,}", "max |Δ logit| = %{y:.2e}"),
    ))
    scale = float(table["logit_scale"].iloc[0])
    # Labelled by hand: on a log axis plotly places an hline's own annotation at y = value, not log10(value).
    for value, colour, dash, text, side in ((tolerance, "red", "dash", f"tolerance {tolerance:g}", 0),
                                            (scale, REFERENCE, "dot", "largest |logit| itself", 1)):
        figure.add_hline(y=value, line=dict(color=colour, dash=dash))
        figure.add_annotation(x=side, xref="paper", xanchor="right" if side else "left", y=np.log10(value), yref="y",
                              yanchor="bottom", text=text, showarrow=False, font=dict(color=colour))
    values = np.maximum(shown["max_abs_difference"].to_numpy(), FLOOR)
    low = min([tolerance, *values]) / 30
    high = max([scale, *values]) * 30
    log_axis(figure, "x", shown["shift"])
    log_axis(figure, "y", range=[np.log10(low), np.log10(high)])
    return _layout(figure, "Equivariance: the same pair of tokens shifted by s", "shift s (log)",
                   "max abs difference (log)", height=400)

"""Plotly builder for the Theory page's equivariance check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.charts import MEASURED, REFERENCE, _layout

FLOOR = 1e-12  # an exact zero (the unshifted pair) drawn at the bottom of the log axis


def equivariance(table: pd.DataFrame, tolerance: float) -> go.Figure:
    """Max |Δ logit| against the shift s, both on log axes; shifts beyond a position table are left out."""
    shown = table[(table["shift"] > 0) & table["max_abs_difference"].notna()]
    figure = go.Figure(go.Scatter(
        x=shown["shift"], y=np.maximum(shown["max_abs_difference"], FLOOR), mode="markers+lines",
        name="max |logit(t+s, u+s) − logit(t, u)|", marker=dict(size=9, color=MEASURED),
    ))
    scale = float(table["logit_scale"].iloc[0])
    figure.add_hline(y=tolerance, line=dict(color="red", dash="dash"), annotation_text=f"tolerance {tolerance:g}",
                     annotation_position="top left")
    figure.add_hline(y=scale, line=dict(color=REFERENCE, dash="dot"), annotation_text="largest |logit| itself",
                     annotation_position="top right")
    values = np.maximum(shown["max_abs_difference"].to_numpy(), FLOOR)
    low = min([tolerance, *values]) / 30
    high = max([scale, *values]) * 30
    figure.update_xaxes(type="log", dtick=1)
    figure.update_yaxes(type="log", exponentformat="power", range=[np.log10(low), np.log10(high)])
    return _layout(figure, "Equivariance: the same pair of tokens shifted by s", "shift s (log)",
                   "max abs difference (log)", height=400)

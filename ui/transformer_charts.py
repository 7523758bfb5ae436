"""Plotly builders for the Transformer page (C8): per-head carriers, one head's attention, accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lengen_core.evaluate import wilson_interval
from lengen_core.sequence import SequenceReport
from ui.charts import FITTED, MEASURED, PREDICTED, REFERENCE, _layout
from ui.compare_charts import length_axis

CARRIER_HEAD, PINNED_HEAD, OTHER_HEAD = "#d62728", "#9467bd", MEASURED


def head_title(layer: int, head: int, is_carrier: bool, pinned_key: int | None) -> str:
    tag = " · carrier" if is_carrier else f" · pinned to key {pinned_key}" if pinned_key is not None else ""
    return f"L{layer} H{head}{tag}"


def head_grid(heads: pd.DataFrame, n_layers: int, n_heads: int, offset: int) -> go.Figure:
    """One small s(Δ) panel per head (rows: layers, columns: heads); carrier heads red, pinned purple."""
    rows = heads.drop_duplicates(["layer", "head"]).sort_values(["layer", "head"])
    titles = [head_title(r.layer, r.head, r.is_carrier, None if pd.isna(r.pinned_key) else int(r.pinned_key))
              for r in rows.itertuples()]
    figure = make_subplots(rows=n_layers, cols=n_heads, subplot_titles=titles, shared_xaxes=True,
                           vertical_spacing=0.14, horizontal_spacing=0.06)
    for r in rows.itertuples():
        part = heads[(heads["layer"] == r.layer) & (heads["head"] == r.head)]
        colour = CARRIER_HEAD if r.is_carrier else PINNED_HEAD if not pd.isna(r.pinned_key) else OTHER_HEAD
        figure.add_scatter(x=part["offset"], y=part["s"], mode="lines+markers", marker_size=4, line_color=colour,
                           showlegend=False, row=r.layer + 1, col=r.head + 1)
        figure.add_vline(x=offset, line=dict(color=REFERENCE, dash="dash", width=1), row=r.layer + 1, col=r.head + 1)
    figure.update_xaxes(title_text="offset Δ", row=n_layers)
    figure.update_yaxes(title_text="s(Δ)", col=1)
    figure.update_layout(height=max(300, 230 * n_layers), margin=dict(l=60, r=20, t=60, b=50),
                         title=f"Carrier s(Δ) of every head (dashed: k = {offset})")
    return figure


def head_attention(weights: np.ndarray, length: int, train_length: int, title: str) -> go.Figure:
    figure = go.Figure(go.Heatmap(z=weights, colorscale="Viridis", zmin=0, colorbar=dict(title="weight", thickness=12)))
    if length > train_length:
        for line in (dict(x0=train_length - 0.5, x1=train_length - 0.5, y0=-0.5, y1=length - 0.5),
                     dict(y0=train_length - 0.5, y1=train_length - 0.5, x0=-0.5, x1=length - 0.5)):
            figure.add_shape(type="line", line=dict(color="white", dash="dash", width=1.5), **line)
    figure.update_xaxes(range=[-0.5, length - 0.5], constrain="domain")
    figure.update_yaxes(range=[length - 0.5, -0.5], scaleanchor="x", constrain="domain")
    return _layout(figure, title, "key position u", "query position t", height=420)


def accuracy_by_position(table: pd.DataFrame, train_length: int, chance: float) -> go.Figure:
    figure = go.Figure()
    palette = [MEASURED, PREDICTED, FITTED, "#d62728", "#9467bd", "#8c564b"]
    for i, length in reversed(list(enumerate(sorted(table["length"].unique())))):  # the shortest drawn on top
        rows = table[table["length"] == length]
        figure.add_scatter(x=rows["position"], y=rows["accuracy"], mode="lines", name=f"L = {length}",
                           line_color=palette[i % len(palette)])
    figure.add_vline(x=train_length - 0.5, line=dict(color=REFERENCE, dash="dash"), annotation_text="training length",
                     annotation_position="bottom right")
    figure.add_hline(y=chance, line=dict(color=REFERENCE, dash="dot"), annotation_text=f"chance {chance:.3f}",
                     annotation_position="bottom right")
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy by position", "position t", "accuracy")


def accuracy_by_length(table: pd.DataFrame, chance: float) -> go.Figure:
    figure = go.Figure()
    figure.add_scatter(x=table["length"], y=table["accuracy"], mode="markers+lines", name="positions t ≥ k",
                       line_color=MEASURED)
    figure.add_scatter(x=table["length"], y=table["accuracy_beyond"], mode="markers+lines",
                       name="positions beyond the training length", line=dict(color=PREDICTED, dash="dash"))
    figure.add_scatter(x=table["length"], y=table["target_mass"], mode="markers", name="carrier head's target mass",
                       marker=dict(color=FITTED, symbol="diamond-open", size=9))
    figure.add_hline(y=chance, line=dict(color=REFERENCE, dash="dot"), annotation_text=f"chance {chance:.3f}")
    length_axis(figure, table["length"])
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy by length", "test length L (log)", "")


def beyond_table(label: str, reports: list[SequenceReport], train_length: int) -> pd.DataFrame:
    """Accuracy over the positions past training, with 95% Wilson intervals over samples × (L − L_train)
    answers (correlated within a sequence, so a little optimistic, as in the verdict); lengths past training only."""
    rows = []
    for r in reports:
        if r.accuracy_beyond is None:
            continue
        answers = r.samples * (r.length - train_length)
        low, high = wilson_interval(round(r.accuracy_beyond * answers), answers)
        rows.append({"run": label, "length": r.length, "accuracy": r.accuracy_beyond, "accuracy_low": low,
                     "accuracy_high": high})
    return pd.DataFrame(rows, columns=["run", "length", "accuracy", "accuracy_low", "accuracy_high"])

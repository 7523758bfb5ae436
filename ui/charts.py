"""Plotly chart builders: plain data in, a figure out. No Streamlit, no tensors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

HEIGHT = 380
MEASURED, PREDICTED, FITTED, REFERENCE = "#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"


def _layout(figure: go.Figure, title: str, x: str, y: str | None, height: int = HEIGHT) -> go.Figure:
    figure.update_layout(
        title=title, xaxis_title=x, height=height, margin=dict(l=60, r=20, t=50, b=90),
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, xanchor="left"),
    )
    if y is not None:
        figure.update_yaxes(title_text=y)
    return figure


def training_curve(history: pd.DataFrame, total_steps: int) -> go.Figure:
    figure = make_subplots(specs=[[{"secondary_y": True}]])
    figure.add_scatter(x=history["step"], y=history["loss"], name="loss", line_color=MEASURED,
                       mode="lines+markers", marker_size=3)
    figure.add_scatter(x=history["step"], y=history["accuracy"], name="accuracy", line_color=PREDICTED,
                       mode="lines+markers", marker_size=3, secondary_y=True)
    figure.update_xaxes(range=[0, total_steps])
    figure.update_yaxes(title_text="cross-entropy loss", secondary_y=False, rangemode="tozero")
    figure.update_yaxes(title_text="batch accuracy", secondary_y=True, range=[0, 1.05], dtick=0.2)
    return _layout(figure, "Training", "step", None)


def attention_map(weights: np.ndarray, pool: int, length: int, train_length: int) -> go.Figure:
    cells = pool * np.arange(weights.shape[0])
    figure = go.Figure(go.Heatmap(z=weights, x=cells, y=cells, colorscale="Viridis", zmin=0,
                                  colorbar=dict(title="weight", thickness=12)))
    for line in (dict(x0=train_length - 0.5, x1=train_length - 0.5, y0=0, y1=length),
                 dict(y0=train_length - 0.5, y1=train_length - 0.5, x0=0, x1=length)):
        figure.add_shape(type="line", line=dict(color="white", dash="dash", width=1.5), **line)
    figure.update_yaxes(autorange="reversed", scaleanchor="x")
    pooled = f", max-pooled {pool}×{pool}" if pool > 1 else ""
    return _layout(figure, f"L = {length}{pooled}", "key position u", "query position t", height=420)


def zoom_map(zoom: np.ndarray, first_query: int, first_key: int, target_key: int) -> go.Figure:
    queries = first_query + np.arange(zoom.shape[0])
    keys = first_key + np.arange(zoom.shape[1])
    figure = go.Figure(go.Heatmap(z=zoom, x=keys, y=queries, colorscale="Viridis",
                                  colorbar=dict(title="weight", thickness=12)))
    figure.add_scatter(x=[target_key], y=[queries[-1]], mode="markers", name="target key t − k",
                       marker=dict(symbol="circle-open", size=14, color="red", line_width=2))
    figure.update_yaxes(autorange="reversed")
    return _layout(figure, "Zoom: last queries × last keys", "key position u", "query position t")


def argmax_trace(argmax_keys: np.ndarray, train_length: int, offset: int) -> go.Figure:
    t = np.arange(len(argmax_keys))
    figure = go.Figure()
    figure.add_scatter(x=t, y=argmax_keys, mode="markers", name="j*(t) measured",
                       marker=dict(size=4, color=MEASURED))
    figure.add_scatter(x=t, y=t - offset, mode="lines", name="j = t − k (relative rule)",
                       line=dict(color=FITTED, dash="dash"))
    figure.add_scatter(x=t, y=np.full(len(t), train_length - 1 - offset), mode="lines",
                       name="j = L_train − 1 − k (pinned)", line=dict(color=PREDICTED, dash="dot"))
    figure.add_vline(x=train_length - 0.5, line=dict(color=REFERENCE, dash="dash"))
    return _layout(figure, "Argmax key j*(t) of every query", "query position t", "argmax key j*")


def carrier_curve(offsets: np.ndarray, values: np.ndarray, train_length: int, offset: int) -> go.Figure:
    figure = go.Figure(go.Scatter(x=offsets, y=values, mode="lines+markers", name="s(Δ)",
                                  marker=dict(size=4), line_color=MEASURED))
    figure.add_vrect(x0=-0.5, x1=train_length - 0.5, fillcolor=REFERENCE, opacity=0.15, line_width=0,
                     annotation_text="training range", annotation_position="bottom right")
    figure.add_vline(x=offset, line=dict(color="red", dash="dash"), annotation_text=f"k = {offset}",
                     annotation_position="top right")
    return _layout(figure, "Carrier s(Δ): mean positional logit at offset Δ", "offset Δ = t − u", "s(Δ)")


def recurrences(offsets: list[int], gaps: list[float], train_length: int) -> go.Figure:
    figure = go.Figure(go.Scatter(x=offsets, y=gaps, mode="markers", name="near-recurrence",
                                  marker=dict(color="red", size=7, symbol="x")))
    figure.update_xaxes(type="log")
    return _layout(figure, "Near-recurrences: far offsets whose logit comes back near s(k)",
                   "offset Δ (log)", "gap to target logit (nats)", height=320)


def spectrum(frequencies: np.ndarray, amplitudes: np.ndarray, analytic: bool) -> go.Figure:
    figure = go.Figure(go.Scatter(x=frequencies, y=amplitudes, mode="markers+lines", name="A_j",
                                  line_color=MEASURED))
    if analytic:
        figure.update_xaxes(type="log")
    return _layout(figure, "Spectrum", "frequency ω (rad/token)", "amplitude A")


def singular_values(values: np.ndarray, rank: int) -> go.Figure:
    shown = values[values > 1e-10 * values.max()] if values.max() > 0 else values[:1]  # the rest is round-off
    index = np.arange(1, len(shown) + 1)
    figure = go.Figure(go.Scatter(x=index, y=shown, mode="markers+lines", name="σ_i", line_color=MEASURED))
    figure.add_vline(x=rank + 0.5, line=dict(color="red", dash="dash"),
                     annotation_text=f"effective rank {rank}")
    figure.update_yaxes(type="log")
    return _layout(figure, "Singular values of S_tu = s(t − u) (above 1e-10·σ₁)", "index i", "σ_i (log)")


def dilution(table: pd.DataFrame, fit_table: pd.DataFrame | None, chance: float) -> go.Figure:
    """Measured accuracy (Wilson band) and target mass, the prediction and the fitted law, on log x."""
    n = table["length"]
    figure = go.Figure()
    figure.add_scatter(x=pd.concat([n, n[::-1]]), y=pd.concat([table["accuracy_high"], table["accuracy_low"][::-1]]),
                       fill="toself", fillcolor="rgba(31,119,180,0.15)", line_width=0, name="95% Wilson band",
                       hoverinfo="skip")
    figure.add_scatter(x=n, y=table["accuracy"], mode="markers+lines", name="accuracy measured",
                       line_color=MEASURED)
    figure.add_scatter(x=n, y=table["target_mass"], mode="markers", name="target mass p measured",
                       marker=dict(color=MEASURED, symbol="diamond-open", size=9))
    figure.add_scatter(x=n, y=table["predicted_accuracy"], mode="lines", name="accuracy predicted",
                       line=dict(color=PREDICTED, dash="dash"))
    figure.add_scatter(x=n, y=table["predicted_mass"], mode="lines", name="p predicted",
                       line=dict(color=PREDICTED, dash="dot"))
    if fit_table is not None:
        figure.add_scatter(x=fit_table["length"], y=fit_table["fitted_mass"], mode="lines",
                           name="p fitted law", line=dict(color=FITTED, width=3, dash="longdash"))
    figure.add_hline(y=chance, line=dict(color=REFERENCE, dash="dash"), annotation_text=f"chance 1/V = {chance:.3f}")
    figure.update_xaxes(type="log")
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy and target mass against length", "test length L (log)", "", height=460)


def inverse_mass(table: pd.DataFrame, fit_table: pd.DataFrame | None) -> go.Figure:
    figure = go.Figure(go.Scatter(x=table["length"], y=1 / table["target_mass"], mode="markers",
                                  name="1/p measured", marker=dict(color=MEASURED, size=8)))
    figure.add_scatter(x=table["length"], y=1 / table["predicted_mass"], mode="lines", name="1/p predicted",
                       line=dict(color=PREDICTED, dash="dot"))
    if fit_table is not None:
        figure.add_scatter(x=fit_table["length"], y=1 / fit_table["fitted_mass"], mode="lines",
                           name="1/p fitted: 1/p(L_train) + (L − L_train)·e^(−m_out)", line_color=FITTED)
    figure.update_xaxes(type="log")
    figure.update_yaxes(type="log")
    return _layout(figure, "1/p against length (log–log)", "test length L (log)", "1/p (log)")

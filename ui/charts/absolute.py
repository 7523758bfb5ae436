"""Plotly builders for where absolute position comes from (lengen_core.analysis.absolute): the sink per
head, the position probe against its untrained range, and the softmax denominators."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.charts.common import FITTED, MEASURED, PREDICTED, REFERENCE, _layout, hover

LENGTH_COLOURS = (MEASURED, PREDICTED, FITTED, "#9467bd")
BOTTOM = 130  # px under the plots: the tick labels, the x-axis title, then the legend


def _below_axis_title(height: int, top: int = 60) -> float:
    """The legend's y (paper units) 75 px under the plots, clear of the x-axis title at any height."""
    return -75 / (height - top - BOTTOM)


def sink_table(sink: np.ndarray, uniform: np.ndarray) -> pd.DataFrame:
    """One row per (layer, head, query t): the mean weight on key 0 and the uniform share 1 / (t + 1)."""
    layers, heads, T = sink.shape
    return pd.DataFrame([{"layer": layer, "head": head, "query": t, "weight_on_key_0": float(sink[layer, head, t]),
                          "uniform": float(uniform[t])}
                         for layer in range(layers) for head in range(heads) for t in range(T)])


def sink_grid(table: pd.DataFrame, train_length: int) -> go.Figure:
    """Weight on key 0 against the query position, one panel per head (rows: layers), uniform dashed."""
    layers, heads = int(table["layer"].max()) + 1, int(table["head"].max()) + 1
    figure = make_subplots(rows=layers, cols=heads, shared_xaxes=True, shared_yaxes=True,
                           subplot_titles=[f"L{layer} H{head}" for layer in range(layers) for head in range(heads)],
                           vertical_spacing=0.16, horizontal_spacing=0.05)
    for (layer, head), part in table.groupby(["layer", "head"]):
        where = dict(row=layer + 1, col=head + 1)
        figure.add_scatter(x=part["query"], y=part["uniform"], mode="lines", line=dict(color=REFERENCE, dash="dash"),
                           name="uniform 1/(t+1)", showlegend=layer == head == 0, legendgroup="uniform",
                           hovertemplate=hover("t = %{x:,}", "uniform %{y:.3f}"), **where)
        figure.add_scatter(x=part["query"], y=part["weight_on_key_0"], mode="lines+markers", marker_size=4,
                           line_color=MEASURED, name="weight on key 0", showlegend=layer == head == 0,
                           legendgroup="sink", hovertemplate=hover("t = %{x:,}", "weight on key 0 %{y:.3f}"), **where)
        figure.add_vline(x=train_length - 0.5, line=dict(color=REFERENCE, dash="dot", width=1), **where)
    figure.update_yaxes(range=[-0.03, 1.03])
    figure.update_xaxes(title_text="query position t", row=layers)
    figure.update_yaxes(title_text="weight on key 0", col=1)
    height = max(340, 250 * layers)
    figure.update_layout(height=height, margin=dict(l=60, r=20, t=60, b=BOTTOM),
                         legend=dict(orientation="h", yanchor="top", y=_below_axis_title(height), x=0),
                         title=f"The sink: each head's weight on position 0 (dotted: L_train = {train_length})")
    return figure


def probe_table(probes: dict[int, object]) -> pd.DataFrame:
    """One row per (probe length, layer): trained R², the untrained seeds' range, whether it beats it."""
    return pd.DataFrame([{"length": length, "layer": layer, "r2": r2, "untrained_low": low, "untrained_high": high,
                          "beats": beat}
                         for length, probe in probes.items()
                         for layer, (r2, low, high, beat) in enumerate(zip(probe.r2, probe.baseline_low,
                                                                            probe.baseline_high, (None, *probe.beats),
                                                                            strict=True))])


def probe_chart(table: pd.DataFrame, seeds: int) -> go.Figure:
    """Held-out R² per layer, trained (markers) against the untrained seeds' range (a bar from low to high)."""
    figure = go.Figure()
    lengths = sorted(table["length"].unique())
    for i, length in enumerate(lengths):
        part, colour = table[table["length"] == length], LENGTH_COLOURS[i % len(LENGTH_COLOURS)]
        x = part["layer"] + (i - (len(lengths) - 1) / 2) * 0.18
        figure.add_bar(x=x, base=part["untrained_low"], y=part["untrained_high"] - part["untrained_low"] + 0.004,
                       width=0.14, marker_color=colour, opacity=0.3, name=f"untrained ({seeds} seeds), L = {length}",
                       hovertemplate=hover(f"L = {length}", "untrained R² %{base:.3f} to " + "%{customdata:.3f}"),
                       customdata=part["untrained_high"])
        figure.add_scatter(x=x, y=part["r2"], mode="markers", marker=dict(color=colour, size=11, symbol="diamond"),
                           name=f"trained, L = {length}", hovertemplate=hover(f"L = {length}", "trained R² %{y:.3f}"))
    figure.update_xaxes(tickvals=sorted(table["layer"].unique()),
                        ticktext=["embeddings" if v == 0 else f"after block {v}" for v in sorted(table["layer"].unique())])
    figure.update_layout(barmode="overlay")
    return _layout(figure, "Position probe: held-out R² of a linear read of t", "residual stream", "R²")


def denominator_table(measured: np.ndarray | None, exact: np.ndarray | None) -> pd.DataFrame:
    """One row per (layer, head, query t): ln of the mean denominator measured, and exact where known (layer 0)."""
    if measured is None:
        return pd.DataFrame(columns=["layer", "head", "query", "measured", "exact"])
    layers, heads, T = measured.shape
    return pd.DataFrame([{"layer": layer, "head": head, "query": t, "measured": float(measured[layer, head, t]),
                          "exact": float(exact[head, t]) if exact is not None and layer == 0 else np.nan}
                         for layer in range(layers) for head in range(heads) for t in range(T)])


def denominator_chart(table: pd.DataFrame, train_length: int) -> go.Figure:
    """ln E[Z_t] against t, one panel per layer (its own scale): each head measured (markers), layer 0's
    exact sums from the weights (lines)."""
    layers = int(table["layer"].max()) + 1
    figure = make_subplots(rows=layers, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                           subplot_titles=[f"layer {layer}" + (": exact (lines) and measured" if layer == 0 else
                                                               ": measured") for layer in range(layers)])
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
    for (layer, head), part in table.groupby(["layer", "head"]):
        colour, where = palette[head % len(palette)], dict(row=layer + 1, col=1)
        figure.add_scatter(x=part["query"], y=part["measured"], mode="markers", marker=dict(size=5, color=colour),
                           name=f"H{head} measured", legendgroup=f"H{head}", showlegend=layer == 0,
                           hovertemplate=hover(f"L{layer} H{head}, t = %{{x:,}}", "ln mean Z_t %{y:.2f}"), **where)
        if part["exact"].notna().any():
            figure.add_scatter(x=part["query"], y=part["exact"], mode="lines", line=dict(color=colour, width=2),
                               name=f"H{head} exact", legendgroup=f"H{head}",
                               hovertemplate=hover(f"L{layer} H{head}, t = %{{x:,}}", "ln E[Z_t] %{y:.2f}"), **where)
        figure.add_vline(x=train_length - 0.5, line=dict(color=REFERENCE, dash="dot", width=1), **where)
    figure.update_xaxes(title_text="query position t", row=layers)
    figure.update_yaxes(title_text="ln Z_t (nats)")
    height = max(360, 260 * layers)
    figure.update_layout(height=height, margin=dict(l=60, r=20, t=60, b=BOTTOM),
                         legend=dict(orientation="h", yanchor="top", y=_below_axis_title(height), x=0),
                         title=f"The mask's share: each head's softmax denominator (dotted: L_train = {train_length})")
    return figure

"""Plotly chart builders: plain data in, a figure out. No Streamlit, no tensors.

Readable on a projector: log axes are labelled at powers of ten only, as 10ⁿ (`log_axis`); heatmap
axes end at the data; every hover gives rounded numbers and, for a measurement, how many samples it
came from (`hover`); accuracy is drawn with its 95% Wilson band (`band`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lengen_core.analysis.horizon import NEAR_MULTIPLE
from lengen_core.thresholds import ACCURACY_BAR
from ui.charts.readable import MIN_FONT, legible

HEIGHT = 380
MAP_HEIGHT = 500  # a square heatmap: as tall as a stacked chart on a 1024 px screen is wide
MEASURED, PREDICTED, FITTED, REFERENCE = "#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"
LEGEND_GAP = 68  # px from the plot's bottom edge to the legend: the x ticks and title at 14 px above it
VOTE = "#9467bd"  # the ideal vote readout (the most attended token answers), beside the model's accuracy


def _layout(figure: go.Figure, title: str, x: str, y: str | None, height: int = HEIGHT) -> go.Figure:
    right = max(20, figure.layout.margin.r or 0)  # wider where a label sits outside the plot (`chance_line`)
    # The legend's top LEGEND_GAP px under the plot, below the x ticks and title at any height (a share of the
    # plot's height put it over the axis title in a short chart); plotly grows the bottom margin for its rows.
    figure.update_layout(
        title=title, xaxis_title=x, height=height, margin=dict(l=60, r=right, t=50, b=90),
        legend=dict(orientation="h", yanchor="top", y=-LEGEND_GAP / (height - 50 - 90), x=0, xanchor="left"),
        hoverlabel=dict(namelength=-1),
    )
    figure.update_xaxes(exponentformat="power")  # 10⁻⁴, never the SI "100μ"
    figure.update_yaxes(exponentformat="power")
    if y is not None:
        figure.update_yaxes(title_text=y)
    return figure


def log_axis(figure: go.Figure, axis: str = "x", values=None, **options) -> go.Figure:
    """A log axis labelled only at powers of ten, as 10ⁿ (plotly's own reads "5, 10, 2, 5, 100").
    `axis` is "x" or "y"; given the `values` drawn on it, an axis that would hold fewer than two powers
    of ten spans the decades around them instead, so it has two labels. `options` go to update_xaxes/yaxes."""
    update = figure.update_xaxes if axis == "x" else figure.update_yaxes
    span = None if values is None else decades(values)
    if span is not None:
        options.setdefault("range", span)
    return update(type="log", dtick=1, exponentformat="power", showexponent="all", **options)


def decades(values) -> list[float] | None:
    """log10 range reaching two powers of ten when `values` cover fewer, else None: out to the nearer
    power when one is inside ([32, 256] → 10 … 256), to the powers around them when none is."""
    positive = np.asarray(values, dtype=np.float64)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if not len(positive):
        return None
    low, high = np.log10(positive.min()), np.log10(positive.max())
    inside = np.floor(high) - np.ceil(low) + 1  # powers of ten within [low, high]
    if inside >= 2:
        return None
    if inside == 1:  # reach the power below the one inside, or the one above, whichever is nearer
        below, above = np.ceil(low) - 1, np.floor(high) + 1
        low, high = (below, high) if low - below <= above - high else (low, above)
    else:
        low, high = np.floor(low), np.floor(low) + 1
    pad = 0.05 * (high - low)
    return [float(low - pad), float(high + pad)]


CHANCE_MARGIN = 96  # pixels right of the plot for the chance line's label


def chance_line(figure: go.Figure, chance: float, dash: str = "dash", label: bool = True, **where) -> go.Figure:
    """The chance level 1/V as a grey line across the plot, labelled outside its right edge (in the margin,
    so the label never covers a data point). `where`: row and col of a panel of make_subplots; `label`
    False for the panels after the first that carries it."""
    figure.add_hline(y=chance, line=dict(color=REFERENCE, dash=dash, width=1.5), **where)
    if label:
        figure.add_annotation(text=f"chance<br>1/V = {chance:.3g}", x=1, xref="x domain", xanchor="left",
                              y=chance, yref="y", yanchor="middle", showarrow=False, align="left",
                              font=dict(color=legible(REFERENCE), size=MIN_FONT), **where)
        figure.update_layout(margin=dict(r=CHANCE_MARGIN))
    return figure


def hover(*lines: str) -> str:
    """A hover template from lines whose numbers carry their format ("%{y:.3f}"), the trace name last."""
    return "<br>".join(lines) + "<extra>%{fullData.name}</extra>"


def band(figure: go.Figure, x, low, high, colour: str, name: str = "95% Wilson band", **options) -> None:
    """A shaded interval from `low` to `high`: the upper edge, then the lower edge filled up to it.
    `options` (legendgroup, showlegend, …) apply to both edges; only the lower one can be in the legend."""
    edge = {"mode": "lines", "line": dict(width=0, color=colour), "hoverinfo": "skip", **options}
    figure.add_scatter(x=list(x), y=list(high), name=f"{name} (upper)", **{**edge, "showlegend": False})
    figure.add_scatter(x=list(x), y=list(low), name=name, fill="tonexty", fillcolor=_transparent(colour), **edge)


def _transparent(colour: str, alpha: float = 0.18) -> str:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _named(title: str, head: str | None) -> str:
    """The title, after the head it shows when the run has several ('Layer 0, head 0 · L = 64')."""
    return f"{head} · {title}" if head else title


def accuracy_hover(table: pd.DataFrame, x: str = "L = %{x:,}") -> tuple[np.ndarray | None, str]:
    """customdata and hover template of an accuracy curve: its interval and sample count where the
    table has them (columns `accuracy_low`, `accuracy_high`, `samples`)."""
    columns = [c for c in ("accuracy_low", "accuracy_high", "samples") if c in table.columns]
    lines, i = [x, "accuracy %{y:.3f}"], 0
    if {"accuracy_low", "accuracy_high"} <= set(columns):
        lines[1] += " (95%: %{customdata[0]:.3f}–%{customdata[1]:.3f})"
        i = 2
    if "samples" in columns:
        lines.append(f"n = %{{customdata[{i}]:,}} sequences")
    return (table[columns].to_numpy() if columns else None), hover(*lines)


def training_curve(history: pd.DataFrame, total_steps: int) -> go.Figure:
    figure = make_subplots(specs=[[{"secondary_y": True}]])
    figure.add_scatter(x=history["step"], y=history["loss"], name="loss", line_color=MEASURED,
                       mode="lines+markers", marker_size=3, hovertemplate=hover("step %{x:,}", "loss %{y:.3f}"))
    figure.add_scatter(x=history["step"], y=history["accuracy"], name="accuracy", line_color=PREDICTED,
                       mode="lines+markers", marker_size=3, secondary_y=True,
                       hovertemplate=hover("step %{x:,}", "batch accuracy %{y:.3f}"))
    figure.update_xaxes(range=[0, total_steps])
    figure.update_yaxes(title_text="cross-entropy loss", secondary_y=False, rangemode="tozero")
    figure.update_yaxes(title_text="batch accuracy", secondary_y=True, range=[0, 1.05], dtick=0.2)
    return _layout(figure, "Training", "step", None)


def probe_curve(probes: pd.DataFrame, total_steps: int, train_length: int, ceiling: int | None = None) -> go.Figure:
    """The horizon and m_out predicted from the weights during training (columns probe_step, horizon,
    m_out); the horizon in multiples of the training length, on a log axis. A probe looks no further than
    `ceiling` tokens (NEAR_MULTIPLE × the training length by default): a horizon there is a bound, drawn as
    an open triangle at the ceiling marked "≥", never as a measured value on a line."""
    ceiling = NEAR_MULTIPLE * train_length if ceiling is None else ceiling
    figure = make_subplots(specs=[[{"secondary_y": True}]])
    times = probes["horizon"].astype(float) / train_length
    bounded = probes["horizon"].astype(float) >= ceiling
    found = times.where(~bounded)
    figure.add_scatter(x=probes["probe_step"], y=found, name="predicted horizon", line_color=PREDICTED,
                       mode="lines+markers", marker_size=6, connectgaps=False,
                       customdata=probes["horizon"], hovertemplate=hover("step %{x:,}", "horizon %{customdata:,} tokens",
                                                                         "= %{y:.1f}× the training length"))
    if bounded.any():
        figure.add_scatter(x=probes["probe_step"][bounded], y=np.full(int(bounded.sum()), ceiling / train_length),
                           name=f"≥ {ceiling:,} (limit)", mode="markers+text",
                           marker=dict(symbol="triangle-up-open", size=11, color=PREDICTED, line_width=2),
                           text=["≥"] * int(bounded.sum()), textposition="middle left",
                           textfont=dict(color=PREDICTED, size=15),
                           hovertemplate=hover("step %{x:,}", f"horizon ≥ {ceiling:,} tokens "
                                               f"(≥ {ceiling / train_length:g}× the training length):",
                                               "at least this far; a probe looks no further"))
        figure.add_scatter(x=[0, total_steps], y=[ceiling / train_length] * 2, mode="lines", hoverinfo="skip",
                           line=dict(color=REFERENCE, dash="dot", width=1), showlegend=False, name="probe ceiling")
    figure.add_scatter(x=probes["probe_step"], y=probes["m_out"], name="m_out", line_color=MEASURED,
                       mode="lines+markers", marker_size=5, secondary_y=True, line_dash="dot",
                       hovertemplate=hover("step %{x:,}", "m_out %{y:.2f} nats"))
    figure.update_xaxes(range=[0, total_steps * 1.03])  # room for a marker on the last step
    if times.dropna().empty:  # below the bar at the training length at every probe so far
        figure.add_annotation(text=f"no horizon yet: predicted accuracy below {ACCURACY_BAR:g} at the training length",
                              xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False)
    # From 1× (the training length) to the ceiling, so the axis holds at least the labels 1 and 10.
    shown = np.log10([1.0, *times.dropna(), ceiling / train_length])
    log_axis(figure, "y", title_text="horizon (× training length)", range=[shown.min() - 0.05, shown.max() + 0.2],
             secondary_y=False)
    margins = probes["m_out"].astype(float).dropna()
    if len(margins):  # a nat of range at least, with ticks of its own (not synced to the log axis's two)
        low, high = float(margins.min()), float(margins.max())
        middle, half = (low + high) / 2, max((high - low) / 2 * 1.15, 0.5)
        figure.update_yaxes(range=[middle - half, middle + half], tickmode="auto", nticks=6, tickformat=".1f",
                            showgrid=False, secondary_y=True)
    figure.update_yaxes(title_text="m_out (nats)", secondary_y=True)
    return _layout(figure, "Horizon and m_out, predicted from the weights", "step", None)


def attention_map(weights: np.ndarray, pool: int, length: int, train_length: int, head: str | None = None) -> go.Figure:
    """The pooled queries × keys map; each cell is drawn over the pool × pool positions it covers, and
    the axes end where the positions do (0 … L − 1). `head` names the head of a multi-layer run."""
    cells = weights.shape[0]
    end = pool * cells - 0.5  # the last cell's far edge: L − 0.5 when pool divides L
    where = ("query t %{y:,.0f}, key u %{x:,.0f}" if pool == 1 else
             f"queries t ≈ %{{y:,.0f}}, keys u ≈ %{{x:,.0f}} ({pool}×{pool} positions)")
    figure = go.Figure(go.Heatmap(z=weights, x0=(pool - 1) / 2, dx=pool, y0=(pool - 1) / 2, dy=pool,
                                  colorscale="Viridis", zmin=0, colorbar=dict(title="weight", thickness=12),
                                  name="attention", hovertemplate=hover(where, "weight %{z:.3f}")))
    if length > train_length:
        for line in (dict(x0=train_length - 0.5, x1=train_length - 0.5, y0=-0.5, y1=end),
                     dict(y0=train_length - 0.5, y1=train_length - 0.5, x0=-0.5, x1=end)):
            figure.add_shape(type="line", line=dict(color="white", dash="dash", width=1.5), **line)
    figure.update_xaxes(range=[-0.5, end], constrain="domain")
    figure.update_yaxes(range=[end, -0.5], scaleanchor="x", constrain="domain")  # query 0 at the top
    pooled = f", max-pooled {pool}×{pool}" if pool > 1 else ""
    figure = _layout(figure, _named(f"L = {length}{pooled}", head), "key position u", "query position t", height=MAP_HEIGHT)
    return figure.update_layout(margin=dict(b=50))  # no legend below a heatmap


def zoom_map(zoom: np.ndarray, first_query: int, first_key: int, target_key: int, head: str | None = None) -> go.Figure:
    """Raw weights of the last queries × the last keys; the last query's target key circled when it is in view."""
    queries = first_query + np.arange(zoom.shape[0])
    keys = first_key + np.arange(zoom.shape[1])
    figure = go.Figure(go.Heatmap(z=zoom, x=keys, y=queries, colorscale="Viridis", name="attention",
                                  colorbar=dict(title="weight", thickness=12),
                                  hovertemplate=hover("query t %{y:,}, key u %{x:,}", "weight %{z:.3f}")))
    if keys[0] <= target_key <= keys[-1]:
        figure.add_scatter(x=[target_key], y=[queries[-1]], mode="markers", name="target key t − k",
                           marker=dict(symbol="circle-open", size=14, color="red", line_width=2),
                           hovertemplate=hover("query t %{y:,}, target key u %{x:,}"))
    figure.update_xaxes(range=[keys[0] - 0.5, keys[-1] + 0.5])
    figure.update_yaxes(range=[queries[-1] + 0.5, queries[0] - 0.5])
    return _layout(figure, _named("Zoom: last queries × last keys", head), "key position u", "query position t")


def argmax_trace(argmax_keys: np.ndarray, train_length: int, offset: int, head: str | None = None) -> go.Figure:
    t = np.arange(len(argmax_keys))
    figure = go.Figure()
    figure.add_scatter(x=t, y=argmax_keys, mode="markers", name="j*(t) measured",
                       marker=dict(size=4, color=MEASURED), hovertemplate=hover("query t %{x:,}", "argmax key %{y:,}"))
    figure.add_scatter(x=t, y=t - offset, mode="lines", name="j = t − k (relative rule)",
                       line=dict(color=FITTED, dash="dash"), hovertemplate=hover("query t %{x:,}", "key %{y:,}"))
    figure.add_scatter(x=t, y=np.full(len(t), train_length - 1 - offset), mode="lines",
                       name="j = L_train − 1 − k (pinned)", line=dict(color=PREDICTED, dash="dot"),
                       hovertemplate=hover("query t %{x:,}", "key %{y:,}"))
    figure.add_vline(x=train_length - 0.5, line=dict(color=REFERENCE, dash="dash"))
    return _layout(figure, _named("Argmax key j*(t) of every query", head), "query position t", "argmax key j*")


def carrier_curve(offsets: np.ndarray, values: np.ndarray, train_length: int, offset: int) -> go.Figure:
    figure = go.Figure(go.Scatter(x=offsets, y=values, mode="lines+markers", name="s(Δ)",
                                  marker=dict(size=4), line_color=MEASURED,
                                  hovertemplate=hover("Δ = %{x:,}", "s(Δ) = %{y:.3f} nats")))
    figure.add_vrect(x0=-0.5, x1=train_length - 0.5, fillcolor=REFERENCE, opacity=0.15, line_width=0,
                     annotation_text="training range", annotation_position="bottom right")
    figure.add_vline(x=offset, line=dict(color="red", dash="dash"), annotation_text=f"k = {offset}",
                     annotation_position="top right")
    return _layout(figure, "Carrier s(Δ): mean positional logit at offset Δ", "offset Δ = t − u", "s(Δ)")


def recurrences(offsets: list[int], gaps: list[float], train_length: int) -> go.Figure:
    figure = go.Figure(go.Scatter(x=offsets, y=gaps, mode="markers", name="near-recurrence",
                                  marker=dict(color="red", size=7, symbol="x"),
                                  hovertemplate=hover("Δ = %{x:,}", "gap %{y:.2f} nats")))
    log_axis(figure, "x", offsets)
    return _layout(figure, "Near-recurrences: far offsets whose logit comes back near s(k)",
                   "offset Δ (log)", "gap to target logit (nats)", height=320)


def spectrum(frequencies: np.ndarray, amplitudes: np.ndarray, analytic: bool) -> go.Figure:
    figure = go.Figure(go.Scatter(x=frequencies, y=amplitudes, mode="markers+lines", name="A_j",
                                  line_color=MEASURED, hovertemplate=hover("ω = %{x:.3g} rad/token", "A = %{y:.3g}")))
    if analytic:
        log_axis(figure, "x", frequencies)
    return _layout(figure, "Spectrum", "frequency ω (rad/token)", "amplitude A")


def singular_values(values: np.ndarray, rank: int) -> go.Figure:
    shown = values[values > 1e-10 * values.max()] if values.max() > 0 else values[:1]  # the rest is round-off
    index = np.arange(1, len(shown) + 1)
    figure = go.Figure(go.Scatter(x=index, y=shown, mode="markers+lines", name="σ_i", line_color=MEASURED,
                                  hovertemplate=hover("i = %{x:d}", "σ_i = %{y:.3g}")))
    figure.add_vline(x=rank + 0.5, line=dict(color="red", dash="dash"),
                     annotation_text=f"effective rank {rank}")
    log_axis(figure, "y", shown)
    return _layout(figure, "Singular values of S_tu = s(t − u) (above 1e-10·σ₁)", "index i", "σ_i (log)")


def dilution(table: pd.DataFrame, fit_table: pd.DataFrame | None, chance: float) -> go.Figure:
    """Measured accuracy (Wilson band) and target mass, the ideal vote readout's accuracy on the same sequences
    (where measured), the prediction and the fitted law, on log x."""
    n = table["length"]
    figure = go.Figure()
    band(figure, n, table["accuracy_low"], table["accuracy_high"], MEASURED, legendgroup="accuracy")
    if "vote_accuracy" in table.columns and table["vote_accuracy"].notna().any():  # not in numbers stored before it;
        # drawn under the model's line (where both are near 1 the model's shows), listed last in the legend
        figure.add_scatter(x=n, y=table["vote_accuracy"], mode="markers+lines", name="ideal vote readout",
                           line=dict(color=VOTE, width=2), marker=dict(symbol="square", size=6), legendrank=1001,
                           customdata=table[["samples"]].to_numpy(),
                           hovertemplate=hover("L = %{x:,}", "ideal vote readout %{y:.3f} (the most attended token "
                                               "answers, on the same sequences)", "n = %{customdata[0]:,} sequences"))
    customdata, template = accuracy_hover(table)
    figure.add_scatter(x=n, y=table["accuracy"], mode="markers+lines", name="accuracy measured",
                       line_color=MEASURED, legendgroup="accuracy", customdata=customdata, hovertemplate=template)
    figure.add_scatter(x=n, y=table["target_mass"], mode="markers", name="target mass p measured",
                       marker=dict(color=MEASURED, symbol="diamond-open", size=9),
                       customdata=table[["target_mass_sem", "samples"]].to_numpy(),
                       hovertemplate=hover("L = %{x:,}", "p %{y:.3g} ± %{customdata[0]:.3f} (s.e.m.)",
                                           "n = %{customdata[1]:,} sequences"))
    figure.add_scatter(x=n, y=table["predicted_accuracy"], mode="lines", name="accuracy predicted",
                       line=dict(color=PREDICTED, dash="dash"),
                       hovertemplate=hover("L = %{x:,}", "accuracy predicted %{y:.3f} (from the weights)"))
    figure.add_scatter(x=n, y=table["predicted_mass"], mode="lines", name="p predicted",
                       line=dict(color=PREDICTED, dash="dot"),
                       hovertemplate=hover("L = %{x:,}", "p predicted %{y:.3g} (from the weights)"))
    if fit_table is not None:
        figure.add_scatter(x=fit_table["length"], y=fit_table["fitted_mass"], mode="lines",
                           name="p fitted law", line=dict(color=FITTED, width=3, dash="longdash"),
                           hovertemplate=hover("L = %{x:,}", "p fitted %{y:.3g}"))
    chance_line(figure, chance)
    log_axis(figure, "x", n)
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy and target mass against length", "test length L (log)", "", height=460)


def inverse_mass(table: pd.DataFrame, fit_table: pd.DataFrame | None) -> go.Figure:
    figure = go.Figure(go.Scatter(x=table["length"], y=1 / table["target_mass"], mode="markers",
                                  name="1/p measured", marker=dict(color=MEASURED, size=8),
                                  customdata=table[["samples"]].to_numpy(),
                                  hovertemplate=hover("L = %{x:,}", "1/p = %{y:.3g}", "n = %{customdata[0]:,} sequences")))
    figure.add_scatter(x=table["length"], y=1 / table["predicted_mass"], mode="lines", name="1/p predicted",
                       line=dict(color=PREDICTED, dash="dot"), hovertemplate=hover("L = %{x:,}", "1/p predicted %{y:.3g}"))
    if fit_table is not None:
        figure.add_scatter(x=fit_table["length"], y=1 / fit_table["fitted_mass"], mode="lines",
                           name="1/p fitted: 1/p(L_train) + (L − L_train)·e^(−m_out)", line_color=FITTED,
                           hovertemplate=hover("L = %{x:,}", "1/p fitted %{y:.3g}"))
    log_axis(figure, "x", table["length"])
    log_axis(figure, "y", 1 / table["target_mass"])
    return _layout(figure, "1/p against length (log–log)", "test length L (log)", "1/p (log)")

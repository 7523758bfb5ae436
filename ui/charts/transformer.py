"""Plotly builders for the Transformer page (C8): per-head carriers, one head's attention, accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lengen_core.analysis.evaluate import wilson_interval
from lengen_core.analysis.sequence import SequenceReport
from ui.charts.common import FITTED, MEASURED, PREDICTED, REFERENCE, _layout, accuracy_hover, band, chance_line, hover
from ui.charts.compare import length_axis

CARRIER_HEAD, PINNED_HEAD, OTHER_HEAD = "#d62728", "#9467bd", MEASURED


def head_title(layer: int, head: int, is_carrier: bool, pinned_key: int | None) -> str:
    tag = " · carrier" if is_carrier else f" · pinned to key {pinned_key}" if pinned_key is not None else ""
    return f"L{layer} H{head}{tag}"


def carrier_table(reports) -> pd.DataFrame:
    """One row per (head, offset Δ) of `lengen_core.analysis.heads.analyse_heads`'s reports: s(Δ), and whether the
    head carries the offset or is pinned (`head_grid`'s input and its CSV)."""
    return pd.concat([pd.DataFrame({"layer": h.layer, "head": h.head, "offset": range(len(h.carrier)), "s": h.carrier,
                                    "is_carrier": h.is_carrier, "pinned_key": h.pinned_key}) for h in reports])


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
                           showlegend=False, row=r.layer + 1, col=r.head + 1, name=f"L{r.layer} H{r.head}",
                           hovertemplate=hover("Δ = %{x:,}", "s(Δ) = %{y:.3f} nats"))
        figure.add_vline(x=offset, line=dict(color=REFERENCE, dash="dash", width=1), row=r.layer + 1, col=r.head + 1)
    figure.update_xaxes(exponentformat="power").update_yaxes(exponentformat="power")
    figure.update_xaxes(title_text="offset Δ", row=n_layers)
    figure.update_yaxes(title_text="s(Δ)", col=1)
    figure.update_layout(height=max(300, 230 * n_layers), margin=dict(l=60, r=20, t=60, b=50),
                         title=f"Carrier s(Δ) of every head (dashed: k = {offset})")
    return figure


def head_attention(weights: np.ndarray, length: int, train_length: int, title: str) -> go.Figure:
    figure = go.Figure(go.Heatmap(z=weights, colorscale="Viridis", zmin=0, colorbar=dict(title="weight", thickness=12),
                                  name="attention", hovertemplate=hover("query t %{y:,}, key u %{x:,}",
                                                                        "mean |weight| %{z:.3f}")))
    if length > train_length:
        for line in (dict(x0=train_length - 0.5, x1=train_length - 0.5, y0=-0.5, y1=length - 0.5),
                     dict(y0=train_length - 0.5, y1=train_length - 0.5, x0=-0.5, x1=length - 0.5)):
            figure.add_shape(type="line", line=dict(color="white", dash="dash", width=1.5), **line)
    figure.update_xaxes(range=[-0.5, length - 0.5], constrain="domain")
    figure.update_yaxes(range=[length - 0.5, -0.5], scaleanchor="x", constrain="domain")
    return _layout(figure, title, "key position u", "query position t", height=420).update_layout(margin=dict(b=50))


def accuracy_by_position(table: pd.DataFrame, train_length: int, chance: float) -> go.Figure:
    """Accuracy in each bin of positions, one curve per length; with the columns of `position_table`,
    each with its 95% Wilson band and the sample count in the hover."""
    figure = go.Figure()
    palette = [MEASURED, PREDICTED, FITTED, "#d62728", "#9467bd", "#8c564b"]
    for i, length in reversed(list(enumerate(sorted(table["length"].unique())))):  # the shortest drawn on top
        rows, colour, name = table[table["length"] == length], palette[i % len(palette)], f"L = {length:,}"
        if {"accuracy_low", "accuracy_high"} <= set(rows.columns):
            band(figure, rows["position"], rows["accuracy_low"], rows["accuracy_high"], colour, f"{name} (95%)",
                 legendgroup=name, showlegend=False)
        customdata, template = accuracy_hover(rows, x="position t %{x:,}")
        figure.add_scatter(x=rows["position"], y=rows["accuracy"], mode="lines", name=name, line_color=colour,
                           legendgroup=name, customdata=customdata, hovertemplate=template)
    figure.add_vline(x=train_length - 0.5, line=dict(color=REFERENCE, dash="dash"), annotation_text="training length",
                     annotation_position="bottom right")
    chance_line(figure, chance, dash="dot")
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy by position", "position t", "accuracy")


def accuracy_by_length(table: pd.DataFrame, chance: float) -> go.Figure:
    """Accuracy over every supervised position and over those past training, and the carrier head's
    target mass; with the columns of `length_table`, both accuracies with their 95% Wilson bands."""
    figure = go.Figure()
    for column, name, line in (("accuracy", "positions t ≥ k", dict(color=MEASURED)),
                               ("accuracy_beyond", "positions beyond the training length",
                                dict(color=PREDICTED, dash="dash"))):
        renamed = {f"{column}{end}": f"accuracy{end}" for end in ("", "_low", "_high")}
        rows = table[[c for c in ("length", "samples", *renamed) if c in table.columns]].rename(columns=renamed)
        rows = rows.dropna(subset=["accuracy"])
        if {"accuracy_low", "accuracy_high"} <= set(rows.columns):
            band(figure, rows["length"], rows["accuracy_low"], rows["accuracy_high"], line["color"], f"{name} (95%)",
                 legendgroup=name, showlegend=False)
        customdata, template = accuracy_hover(rows)
        figure.add_scatter(x=rows["length"], y=rows["accuracy"], mode="markers+lines", name=name, line=line,
                           legendgroup=name, customdata=customdata, hovertemplate=template)
    figure.add_scatter(x=table["length"], y=table["target_mass"], mode="markers", name="carrier head's target mass",
                       marker=dict(color=FITTED, symbol="diamond-open", size=9),
                       hovertemplate=hover("L = %{x:,}", "target mass %{y:.3g}"))
    chance_line(figure, chance, dash="dot")
    length_axis(figure, table["length"])
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy by length", "test length L (log)", "")


def position_table(reports: list[SequenceReport]) -> pd.DataFrame:
    """Accuracy by position of each length, with 95% Wilson intervals over samples × the bin's positions
    (correlated within a sequence, so a little optimistic) and the sample count."""
    parts = []
    for r in reports:
        widths = np.diff(np.append(r.positions, r.length))  # positions in each bin
        answers = r.samples * widths
        low, high = zip(*(wilson_interval(round(a * n), n) for a, n in zip(r.accuracy_by_position, answers,
                                                                          strict=True)), strict=True)
        parts.append(pd.DataFrame({"length": r.length, "position": r.positions, "accuracy": r.accuracy_by_position,
                                   "accuracy_low": low, "accuracy_high": high, "samples": r.samples}))
    return pd.concat(parts, ignore_index=True)


def length_table(reports: list[SequenceReport], train_length: int) -> pd.DataFrame:
    """Per length: accuracy (every supervised position) and past training, each with its 95% Wilson
    interval, the carrier head's target mass and name, and the sample count."""
    beyond = beyond_table("", reports, train_length).set_index("length")
    return pd.DataFrame([{
        "length": r.length, "samples": r.samples, "accuracy": r.accuracy, "accuracy_low": r.accuracy_low,
        "accuracy_high": r.accuracy_high, "accuracy_beyond": r.accuracy_beyond,
        "accuracy_beyond_low": beyond["accuracy_low"].get(r.length), "accuracy_beyond_high":
        beyond["accuracy_high"].get(r.length), "target_mass": r.target_mass,
        "carrier_head": f"L{r.carrier_layer}H{r.carrier_head}"} for r in reports])


def beyond_table(label: str, reports: list[SequenceReport], train_length: int) -> pd.DataFrame:
    """Accuracy over the positions past training, with 95% Wilson intervals over samples × (L − L_train)
    answers (correlated within a sequence, so a little optimistic, as in the verdict) and the sample
    count; lengths past training only."""
    rows = []
    for r in reports:
        if r.accuracy_beyond is None:
            continue
        answers = r.samples * (r.length - train_length)
        low, high = wilson_interval(round(r.accuracy_beyond * answers), answers)
        rows.append({"run": label, "length": r.length, "accuracy": r.accuracy_beyond, "accuracy_low": low,
                     "accuracy_high": high, "samples": r.samples})
    return pd.DataFrame(rows, columns=["run", "length", "accuracy", "accuracy_low", "accuracy_high", "samples"])

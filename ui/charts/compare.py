"""Plotly builders for the Compare page: several runs on one chart, one colour per run, and its table.

Plain data in, a figure out: each builder takes a long table with a `run` column (the legend label).
"""

from __future__ import annotations

import numbers as numeric
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from ui.captions import accuracy as accuracy_captions
from ui.captions import prediction as prediction_captions
from ui.captions.mechanism import toeplitz_baseline_text
from ui.charts.common import REFERENCE, _layout, accuracy_hover, band, chance_line, hover, log_axis

if TYPE_CHECKING:
    from lengen_core.training import Run
    from ui.analyses import Comparison

PALETTE = qualitative.D3


def colours(runs: list[str]) -> dict[str, str]:
    return {run: PALETTE[i % len(PALETTE)] for i, run in enumerate(runs)}


def length_axis(figure: go.Figure, lengths: pd.Series) -> None:
    """Log x labelled at powers of ten (10², 10³, …), spanning at least two of them."""
    log_axis(figure, "x", lengths)


def accuracy_overlay(table: pd.DataFrame, chance: float) -> go.Figure:
    """Accuracy against length (log x) per run, with the chance line; with columns `accuracy_low` and
    `accuracy_high`, each run's 95% interval as a band toggled with its curve; with `samples`, the
    sample count in the hover."""
    figure = go.Figure()
    for run, colour in colours(list(dict.fromkeys(table["run"]))).items():
        rows = table[table["run"] == run]
        if {"accuracy_low", "accuracy_high"} <= set(rows.columns):
            band(figure, rows["length"], rows["accuracy_low"], rows["accuracy_high"], colour, f"{run} (95% interval)",
                 legendgroup=run, showlegend=False)
        customdata, template = accuracy_hover(rows)
        figure.add_scatter(x=rows["length"], y=rows["accuracy"], mode="markers+lines", name=run, line_color=colour,
                           legendgroup=run, customdata=customdata, hovertemplate=template)
    chance_line(figure, chance)
    length_axis(figure, table["length"])
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Accuracy against length", "test length L (log)", "accuracy", height=420)


def mass_overlay(table: pd.DataFrame) -> go.Figure:
    """Measured target mass (solid) and the prediction from the weights (dashed, same colour); with a
    `samples` column, the sample count in the hover."""
    figure = go.Figure()
    counted = "samples" in table.columns
    measured = hover("L = %{x:,}", "p %{y:.3g}", *(["n = %{customdata[0]:,} sequences"] if counted else []))
    for run, colour in colours(list(dict.fromkeys(table["run"]))).items():
        rows = table[table["run"] == run]
        figure.add_scatter(x=rows["length"], y=rows["target_mass"], mode="markers+lines", name=run,
                           line_color=colour, legendgroup=run, hovertemplate=measured,
                           customdata=rows[["samples"]].to_numpy() if counted else None)
        if rows["predicted_mass"].notna().any():
            figure.add_scatter(x=rows["length"], y=rows["predicted_mass"], mode="lines", name=f"{run} (predicted)",
                               line=dict(color=colour, dash="dash"), legendgroup=run,
                               hovertemplate=hover("L = %{x:,}", "p predicted %{y:.3g} (from the weights)"))
    length_axis(figure, table["length"])
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "Target mass p against length (dashed: predicted from the weights)",
                   "test length L (log)", "target mass p", height=420)


def carrier_overlay(table: pd.DataFrame, train_lengths: list[int], offsets: list[int], title: str,
                    y_title: str) -> go.Figure:
    """s(Δ) per run (column `shown`); training ranges shaded, k marked."""
    figure = go.Figure()
    for run, colour in colours(list(dict.fromkeys(table["run"]))).items():
        rows = table[table["run"] == run]
        figure.add_scatter(x=rows["offset"], y=rows["shown"], mode="lines+markers", name=run,
                           line_color=colour, marker_size=3, hovertemplate=hover("Δ = %{x:,}", "s(Δ) %{y:.3f} (as drawn)"))
    figure.add_vrect(x0=-0.5, x1=max(train_lengths) - 0.5, fillcolor=REFERENCE, opacity=0.12, line_width=0,
                     annotation_text="training range", annotation_position="bottom right")
    for k in sorted(set(offsets)):
        figure.add_vline(x=k, line=dict(color="red", dash="dash"), annotation_text=f"k = {k}",
                         annotation_position="top right")
    return _layout(figure, title, "offset Δ = t − u", y_title, height=420)


def _horizon_text(result: Comparison) -> str:
    """The predicted horizon as the Dilution page's table says it, or why there is none."""
    m = result.measurement
    if not m.closed_form:
        return "n/a (transformer)"
    if m.predicted_horizon is None:
        return m.horizon_note or "—"
    if m.horizon_reason is not None:
        return f"none: {m.horizon_reason}"
    return m.predicted_horizon.text


def key_numbers(labels: dict[str, str], results: dict[str, Comparison], runs: dict[str, Run]) -> pd.DataFrame:
    """One row per run: its verdict and readouts first, its config after (a narrow screen scrolls to it)."""
    rows = []
    for run_id, result in results.items():
        config, verdict = runs[run_id].config, runs[run_id].verdict
        four = dict(zip(result.lengths, result.accuracy, strict=True)).get(4 * config.task.train_length)
        rows.append({
            "run": labels[run_id], "learned": "not judged" if verdict is None else "yes" if verdict.learned else "no",
            "past L_train": None if verdict is None or verdict.at_chance_beyond is None
            else "at chance" if verdict.at_chance_beyond else "above chance",
            "accuracy at 4×": four, "m_out (95%)": accuracy_captions.m_out_text(result.fit, result.samples),
            "horizon, predicted": _horizon_text(result),
            "prediction": prediction_captions.status_cell(result.measurement.prediction_status),
            "Toeplitz": result.toeplitz_fraction,
            "Toeplitz untrained": toeplitz_baseline_text(result.toeplitz_baseline, result.toeplitz_range,
                                                         result.toeplitz_relative),
            "argmax Δ": result.carrier_argmax, "samples": result.samples, "carrier": result.carrier_source,
            "encoding": config.model.encoding, "attention": config.model.attention,
            "layers × heads": "single head" if config.model.minimal else
            f"{config.model.n_layers} layer{'s' * (config.model.n_layers != 1)} × {config.model.n_heads} head"
            f"{'s' * (config.model.n_heads != 1)}", "k": config.task.offset,
            "L_train": config.task.train_length, "seed": config.train.seed,
        })
    return pd.DataFrame(rows)


def by_quantity(numbers: pd.DataFrame) -> pd.DataFrame:
    """`key_numbers` turned for the page: a row per quantity, a column per run (its label), every value as
    text, so a few runs fit the page's width whatever the number of quantities (a row per run needs 17
    columns and was cut at 1,400 px)."""
    def text(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return "—"
        if isinstance(value, numeric.Integral):
            return f"{value:,}"
        return f"{value:.3f}" if isinstance(value, numeric.Real) else str(value)

    shown = numbers.set_index("run")
    return pd.DataFrame({"quantity": list(shown.columns),
                         **{run: [text(v) for v in shown.loc[run].tolist()] for run in shown.index}})

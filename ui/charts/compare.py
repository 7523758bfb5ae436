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


def key_figures(labels: dict[str, str], results: dict[str, Comparison], runs: dict[str, Run]) -> pd.DataFrame:
    """The key numbers as data (the CSV): one row per run keyed by its run id (its label beside it), every
    figure a number (NaN where there is none, with the reason in a text column), and each interval in its own
    columns: m_out between m_out_low and m_out_high (the interval to quote, over the answers and the lengths
    fitted), the answers' alone in m_out_answers_low/high; the untrained Toeplitz fraction's range likewise."""
    rows = []
    for run_id, result in results.items():
        config, verdict, m = runs[run_id].config, runs[run_id].verdict, result.measurement
        law, horizon = result.fit.fit, m.predicted_horizon if m.closed_form else None
        spread = result.toeplitz_range or (None, None)
        rows.append({
            "run_id": run_id, "label": labels[run_id],
            "learned": None if verdict is None else verdict.learned,
            "at_chance_past_train": None if verdict is None else verdict.at_chance_beyond,
            "accuracy_at_4x": dict(zip(result.lengths, result.accuracy, strict=True)).get(4 * config.task.train_length),
            "m_out": None if law is None else law.m_out,
            "m_out_low": None if law is None else law.quoted_low, "m_out_high": None if law is None else law.quoted_high,
            "m_out_answers_low": None if law is None else law.m_out_low,
            "m_out_answers_high": None if law is None else law.m_out_high,
            "law": result.fit.status, "law_max_relative_error": None if law is None else law.max_relative_error,
            "law_first_length": None if law is None else law.train_length,
            "law_last_length": None if law is None else law.longest,
            "law_lengths": None if law is None else law.points,
            "horizon_predicted": None if horizon is None else horizon.length,
            "horizon_below": None if horizon is None else horizon.below,
            "horizon_ceiling": None if horizon is None else horizon.ceiling,
            "horizon_note": None if _horizon_text(result) == f"{horizon_length(horizon)}" else _horizon_text(result),
            "prediction": None if m.prediction_status is None else m.prediction_status.status,
            "toeplitz": result.toeplitz_fraction, "toeplitz_untrained": result.toeplitz_baseline,
            "toeplitz_untrained_low": spread[0], "toeplitz_untrained_high": spread[1],
            "toeplitz_relative": result.toeplitz_relative,
            "carrier_argmax": result.carrier_argmax, "carrier": result.carrier_source, "samples": result.samples,
            "encoding": config.model.encoding, "attention": config.model.attention,
            "single_head": config.model.minimal, "n_layers": config.model.n_layers, "n_heads": config.model.n_heads, "offset": config.task.offset,
            "train_length": config.task.train_length, "seed": config.train.seed,
        })
    return _typed(pd.DataFrame(rows))


def horizon_length(horizon) -> str:
    """The horizon as a plain number reads ('8,674'); '' without one."""
    return "" if horizon is None or horizon.length is None else f"{horizon.length:,}"


COUNTS = ("law_first_length", "law_last_length", "law_lengths", "horizon_predicted", "horizon_below", "horizon_ceiling")


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Columns of numbers as numbers even where every run has none (a column of None is object, not NaN)."""
    for name in table.columns:
        if name in COUNTS:
            table[name] = pd.to_numeric(table[name]).astype("Int64")
        elif name in ("learned", "at_chance_past_train"):
            table[name] = table[name].astype("boolean")
        elif name.startswith(("m_out", "toeplitz_untrained", "accuracy", "law_max")):
            table[name] = pd.to_numeric(table[name]).astype("float64")
    return table


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

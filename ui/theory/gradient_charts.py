"""Charts and captions of the Theory page's optimisation experiment (C1): plain data in, a figure or
a sentence out. Every caption is computed from the numbers it describes and says so when they do
not bear out C1; no Streamlit here (the cached wrappers and the drawing are in ui.theory.gradients)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lengen_core.analysis.verdict import CHANCE_TOLERANCE
from lengen_core.thresholds import ACCURACY_BAR
from ui.charts.common import MEASURED, PREDICTED, REFERENCE, _layout, accuracy_hover, band, chance_line, hover, log_axis

CONSTRUCTED, RANDOM = "constructed head", "random start"
COLOURS = {CONSTRUCTED: PREDICTED, RANDOM: MEASURED}
HOLDS = 0.95  # "retrieves": the accuracy the construction promises (lengen_core.models.construct)


def at_chance(low: float, chance: float) -> bool:
    """The verdict's test: the 95% interval's lower end within CHANCE_TOLERANCE of 1/V."""
    return low <= chance + CHANCE_TOLERANCE


def _lines(figure: go.Figure, table: pd.DataFrame, x: str, x_hover: str) -> None:
    for name, rows in table.groupby("start", sort=False):
        colour = COLOURS[name]
        band(figure, rows[x], rows["accuracy_low"], rows["accuracy_high"], colour, legendgroup=name,
             name=f"95% Wilson band ({name})")
        customdata, template = accuracy_hover(rows, x_hover)
        figure.add_scatter(x=rows[x], y=rows["accuracy"], mode="markers+lines", name=name, line_color=colour,
                           legendgroup=name, customdata=customdata, hovertemplate=template)


def reach(table: pd.DataFrame, chance: float, train_length: int, max_positions: int) -> go.Figure:
    """Accuracy against length (log x) of both starts, to the end of the position table."""
    figure = go.Figure()
    _lines(figure, table, "length", "L = %{x:,}")
    chance_line(figure, chance)
    # Labelled by hand: on a log axis plotly places a vline's own annotation at x = value, not log10(value).
    for x, text, side in ((train_length, "L_train", "left"), (max_positions, "end of the table", "right")):
        figure.add_vline(x=x, line=dict(color=REFERENCE, dash="dot"))
        figure.add_annotation(x=np.log10(x), xref="x", xanchor=side, y=0.5, yref="y", text=f" {text} ",
                              showarrow=False, textangle=-90, font=dict(color=REFERENCE))
    log_axis(figure, "x", table["length"])
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, "The same learned table, built or trained: accuracy against length",
                   "test length L (log)", "accuracy at the query")


def reach_caption(table: pd.DataFrame, chance: float, train_length: int, offset: int, max_positions: int) -> str:
    built, trained = (table[table["start"] == name].set_index("length") for name in (CONSTRUCTED, RANDOM))
    four, end = 4 * train_length, int(built.index.max())
    b4, bend, t4 = built.loc[four], built.loc[end], trained.loc[four]
    text = (f"Built by hand, the learned table answers {b4.accuracy:.2f} at 4× the training length (L = {four:,}) "
            f"and {bend.accuracy:.2f} at L = {end:,} ({end // train_length:,}×, the table's last position is "
            f"{max_positions - 1:,}), its most common top key t − k = {int(bend.argmax_key):,}; trained from a random "
            f"start, the same config answers {t4.accuracy:.2f} at 4× (chance {chance:.3f}), its top key "
            f"{int(t4.argmax_key)}.")
    expressive = b4.accuracy >= HOLDS and bend.accuracy >= HOLDS
    fails = at_chance(t4.accuracy_low, chance)
    if expressive and fails:
        return text + (" Learned positions can express the relative rule at every length they have; the trained "
                       "run did not find it (C1).")
    problems = ([] if expressive else [f"the built head is below {HOLDS} far out"]) + \
               ([] if fails else ["the trained run is above chance at 4×"])
    return text + f" This does NOT bear out C1 as the lab states it: {' and '.join(problems)}."


def gradients(norms: np.ndarray, steps: tuple[int, ...], train_length: int, rows: int) -> go.Figure:
    """‖∂loss/∂P_t‖ by position row (y) and step (x), log colour; an exact zero is left blank."""
    shown = norms[:, :rows].T  # (rows, steps)
    with np.errstate(divide="ignore"):
        z = np.where(shown > 0, np.log10(np.where(shown > 0, shown, 1.0)), np.nan)
    figure = go.Figure(go.Heatmap(
        x=list(steps), y=np.arange(rows), z=z, colorscale="Viridis",
        colorbar=dict(title="log₁₀ ‖grad‖", len=0.8), customdata=shown,
        hovertemplate=hover("step %{x:,}, row %{y:d}", "‖grad‖ = %{customdata:.2e}"), name="gradient",
    ))
    figure.add_hline(y=train_length - 0.5, line=dict(color="red", dash="dash"))
    figure.add_annotation(x=0.5, xref="paper", y=(train_length + rows) / 2, yref="y", showarrow=False,
                          text=f"rows ≥ L_train = {train_length}: gradient exactly 0 (blank)", font=dict(color="red"))
    figure.update_yaxes(range=[-0.5, rows - 0.5])
    return _layout(figure, "Gradient norm of each position row, training from a random start", "training step",
                   "position row t of the table", height=420)


def gradient_caption(steps: int, train_length: int, max_positions: int, within: float, beyond: float) -> str:
    text = (f"Over all {steps:,} steps (every step checked, not only those drawn), rows 0–{train_length - 1} got "
            f"gradients up to {within:.2g}; rows {train_length:,}–{max_positions - 1:,} got at most {beyond:.2g}.")
    if beyond == 0.0 and within > 0.0:
        return text + (" No batch is longer than L_train, so those rows are never read in training: they keep their "
                       "random initial values, and nothing pulls them towards the rule the built head has.")
    return text + " This does NOT bear out C1's account: rows past the training length did get a gradient."


def drift(table: pd.DataFrame, chance: float, length: int) -> go.Figure:
    """Accuracy at `length` against training steps, from the construction and from a random start."""
    figure = go.Figure()
    _lines(figure, table, "step", "step %{x:,}")
    chance_line(figure, chance)
    figure.update_yaxes(range=[0, 1.05])
    return _layout(figure, f"Accuracy at 4× the training length (L = {length}) while training",
                   "training step", "accuracy at the query")


def drift_caption(table: pd.DataFrame, chance: float, train_length: int, offset: int,
                  in_range: tuple[float, float], losses: tuple[float, float], beyond: float) -> str:
    """`in_range`: the constructed start's accuracy at L_train before and after training; `losses` its loss
    at the first and last step; `beyond` the largest gradient any row ≥ L_train got in that training."""
    built = table[table["start"] == CONSTRUCTED]
    first, last = built.iloc[0], built.iloc[-1]
    length = int(first["length"])
    target = length - 1 - offset

    def key(row: pd.Series) -> str:
        where = "t − k" if row.argmax_key == target else (
            "inside the training range" if row.argmax_key < train_length else "past the training range")
        return f"{int(row.argmax_key)} ({where}, {row.argmax_share:.0%} of queries)"

    text = (f"Started from the built head (loss {losses[0]:.2f}: its vote readout answers right but is not "
            f"confident), {int(last.step):,} steps lowered the loss to {losses[1]:.2g}. Accuracy at L = {length} went "
            f"from {first.accuracy:.2f} to {last.accuracy:.2f}, at the training length from {in_range[0]:.2f} to "
            f"{in_range[1]:.2f}; the most common top key at L = {length} moved from {key(first)} to {key(last)}.")
    randoms = table[table["start"] == RANDOM]
    if len(randoms):
        text += (f" Trained from the random start instead ({int(randoms.iloc[-1].step):,} steps), accuracy at L = {length} "
                 f"ended at {randoms.iloc[-1].accuracy:.2f}.")
    rows = (" Rows ≥ L_train got no gradient here either: they are still the built ones, so what moved are the "
            "projections, which every position goes through, and the rows in range." if beyond == 0.0
            else f" Rows ≥ L_train got gradients up to {beyond:.2g}.")
    if last.accuracy >= ACCURACY_BAR:
        return text + rows + " Training kept the relative rule here: this run does not show a drift to memorising."
    if at_chance(last.accuracy_low, chance):
        return text + rows + (" Training left the rule for a solution that fits the training range only, even from "
                              "a start that generalised (C1).")
    return text + rows + (f" Lowering the loss on the training range moved the head away from the rule (below {ACCURACY_BAR} "
                          "at 4×), though not yet to chance in these steps.")

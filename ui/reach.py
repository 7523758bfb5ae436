"""How far a run reaches, on the Dilution page: its horizon, measured and predicted, and a way to move
it (train the run longer, as a new run that continues it)."""

from __future__ import annotations

import streamlit as st

from lengen.lineage import continuation
from lengen.share import config_to_query
from lengen_core.analysis.horizon import Horizon
from lengen_core.config import ConfigError
from lengen_core.measure import Measurement
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import Run
from ui.captions import show
from ui.captions.common import Caption
from ui.state import TRAIN_PAGE
from ui.widgets import refusal


def _times(length: int, train_length: int) -> str:
    return f"{length / train_length:,.1f}× the training length"


def measured_text(horizon: Horizon | None, samples: int) -> str:
    if horizon is None:
        return "no length at or past the training length was measured"
    if horizon.length is None:
        return (f"measured below {ACCURACY_BAR:g} already at {horizon.below:,} ({samples:,} samples a length)")
    if horizon.below is None:
        return (f"measured ≥ {ACCURACY_BAR:g} at every length up to {horizon.length:,}, the longest measured: "
                "measure longer lengths to find where it falls")
    return (f"measured ≥ {ACCURACY_BAR:g} up to {horizon.length:,} and below at {horizon.below:,}, the next length "
            f"measured ({samples:,} samples a length): the crossing lies between the two")


def horizon_caption(measured: Horizon | None, predicted: Horizon | None, train_length: int, samples: int,
                    train_longer: bool = True, reason: str | None = None) -> Caption:
    """What this run's two horizons say and whether they agree (the lead), and, with `train_longer`, how to
    move it (the rest)."""
    lead = (f"**Horizon** (the largest length at which accuracy stays ≥ {ACCURACY_BAR:g}): "
            f"{measured_text(measured, samples)}.")
    more = []
    if predicted is not None and predicted.length is not None and not predicted.resolved:
        lead += f" From the weights alone: {predicted.text}."
        more.append("A server with a larger request budget (LENGEN_REQUEST_SECONDS) finds it to the token.")
    elif predicted is not None and predicted.length is not None and predicted.below is None:
        lead += f" From the weights alone it holds up to {predicted.length:,}, the longest length looked at."
    elif predicted is not None and predicted.length is not None:
        lead += f" From the weights alone it is {predicted.length:,} tokens ({_times(predicted.length, train_length)})"
        if measured is not None and measured.length is not None and measured.below is not None:
            inside = measured.length <= predicted.length < measured.below
            lead += (", between the two measured lengths, as it should be" if inside else
                     ", outside the measured bracket: here the two disagree")
        lead += "."
    elif predicted is not None:
        lead += (f" From the weights alone: none, since {reason}." if reason else
                 f" From the weights alone: {predicted.text}.")
    if train_longer:
        more.append("Training can move it: **Train longer** trains this run's weights further, as a new run that "
                    "records which run it continues, and its own Dilution page shows where its horizon went.")
    return Caption(lead, " ".join(more))


def show_horizon(run: Run, measured_run: Measurement, controls: bool = True, notes=None) -> None:
    """Two metrics (measured, predicted) of the run's measurement, a caption from its numbers (in `notes` when
    given: a lesson on a projector writes it beside the chart) and, with `controls`, the Train longer link (a
    lesson in presenter mode shows no control its step does not use)."""
    L, samples = run.config.task.train_length, measured_run.samples
    measured, predicted = measured_run.measured_horizon, measured_run.predicted_horizon
    if predicted is None and measured_run.horizon_note is not None:  # over this server's budget
        refusal("Predicted horizon not computed here",
                ConfigError(measured_run.horizon_note.removeprefix("not computed here: ")))
    a, b, c = st.columns(3)
    a.metric("Horizon, measured", "—" if measured is None or measured.length is None else
             (f"≥ {measured.length:,}" if measured.below is None else f"{measured.length:,}"),
             delta=None if measured is None or measured.below is None else f"below {ACCURACY_BAR:g} at "
             f"{measured.below:,}", delta_color="off", delta_arrow="off",
             help=f"The last measured length before accuracy first falls below {ACCURACY_BAR:g}.")
    b.metric("Horizon, predicted", "—" if predicted is None else
             ("none" if predicted.length is None else f"{predicted.length:,}" if predicted.resolved else
              f"≥ {predicted.length:,}" if predicted.below is None else f"{predicted.length:,}–{predicted.below:,}"),
             delta=None if predicted is None or predicted.length is None else _times(predicted.length, L),
             delta_color="off", delta_arrow="off",
             help=f"The largest length up to {measured_run.horizon_ceiling or 2**20:,} (2^20 tokens, or the end of a "
                  f"learned table) whose accuracy predicted from the weights is ≥ {ACCURACY_BAR:g}, found by "
                  "bisection to the token.")
    if controls:
        longer = continuation(run.config)
        c.page_link(TRAIN_PAGE, label="Train longer", icon=":material/fitness_center:",
                    query_params=config_to_query(longer),
                    help=f"Open the Train form for a new run that starts from this run's weights and trains "
                         f"{longer.train.steps:,} more steps, past 100% training accuracy.")
    show.caption(horizon_caption(measured, predicted, L, samples, controls, measured_run.horizon_reason),
                 "More on the horizon", notes)

"""The charts of a training: its live frame (the carrier, the attention map at 4×, the loss curve and the
predicted horizon), drawn in the same slots under the same keys at every refresh so a chart is updated in
place and never blinks; the untrained model's frame before the first step; and a stored run's training.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lengen.jobs import JobStatus
from lengen.lineage import starting_weights
from lengen.store import RunStore
from lengen_core.analysis.horizon import NEAR_MULTIPLE, Probe, live_probe, probe_interval, probe_seconds_estimate
from lengen_core.analysis.watch import LiveView, starting_view
from lengen_core.config import RunConfig
from lengen_core.models.initial import initial_model
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import PROBE_SHARE, Run
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import mechanism as mechanism_captions
from ui.charts import common as charts
from ui.widgets import chart, present_chart

PROBE_KEYS = ("probe_step", "horizon", "m_out")
STEP_KEYS = ("step", "loss", "accuracy")


@st.cache_data(show_spinner=False, max_entries=16)
def untrained(config: RunConfig) -> tuple[LiveView, Probe | None]:
    """`config`'s model before its first step (the run it continues, for a continuation): its view, and its
    live probe when the training probes (a single head). Cached: a class on one link computes it once; it
    takes the one view and probe a training's step takes (0.1-0.9 s on this 2-core machine)."""
    weights = starting_weights(config, RunStore(read_only=True)) if config.train.continues else None
    view = starting_view(config, weights)
    if not probe_interval(config):
        return view, None
    model = initial_model(config)
    if weights:
        model.load_state_dict(weights)
    return view, live_probe(model.eval(), config, 0)


def frame(status: JobStatus, height: int | None, config: RunConfig | None = None, notes=None) -> None:
    """The carrier, the attention map, the curve and the predicted horizon, each in the same slot and under
    the same key at every refresh (a chart updated in place, never cleared), from the untrained model
    (`config`'s) until the training has its own view and probes. On a projector (`height`) the four
    charts fill the width two by two and their captions fold into `notes` (a popover beside the controls)."""
    start = untrained(config) if config is not None else None
    view = status.view or (start[0] if start else None)
    if height and notes is None:
        notes = st.popover("Captions", icon=":material/info:")
    if view is not None:
        watch(view, status.run_id, height, notes)
    history = status.history
    probes = pd.DataFrame({key: history.get(key, []) for key in PROBE_KEYS})
    if start and start[1] is not None:  # step 0 first: where the horizon started
        probe = start[1]
        probes = pd.concat([pd.DataFrame({"probe_step": [0], "horizon": [probe.horizon], "m_out": [probe.m_out]}),
                            probes[probes["probe_step"] > 0]], ignore_index=True)
    steps_done = status.progress.step if status.progress else 0
    trained = bool(history["step"])
    if not (trained or start):
        return
    losses, horizons = st.columns(2) if height else (st.container(), st.container())
    with losses:
        present_chart(live_curve(history, steps_done), height, "live-curve", titled=False)
    (notes or losses).caption("**What to look for:** the loss falls and the batch accuracy climbs to 1; RoPE and "
                              "learned positions both fit the training length, the difference shows only at longer "
                              "lengths." if trained else "**What to look for:** the loss and batch accuracy of each "
                              "step, from the first step on.")
    if probes.empty:
        return
    train_length = int(history["train_length"][-1]) if history.get("train_length") else start[1].train_length
    ceiling = int(history["probe_ceiling"][-1]) if history.get("probe_ceiling") else start[1].ceiling
    cost = "" if height else probe_cost(history.get("probe_seconds", []), status.progress.elapsed_seconds
                                        if status.progress else 0.0)
    figure = charts.probe_curve(probes, max(steps_done, 1), train_length, reach(probes, ceiling, train_length))
    if height:  # half a projector's width: its note on three lines
        figure.for_each_annotation(lambda note: note.update(
            text=note.text.replace(": ", ":<br>", 1).replace(" at the training length", "<br>at the training length")))
    with horizons:  # (on a projector, without what the probes cost the server: the class needs the rest)
        present_chart(figure, height, "live-probe", titled=False)
    (notes or horizons).caption(f"**What to look for:** {probe_caption(probes, train_length, ceiling)} {cost}")


def reach(probes: pd.DataFrame, ceiling: int, train_length: int) -> int:
    """The chart's ceiling: the probe's own (how far it may look) once a horizon reaches it, else 64× the
    training length or the longest horizon so far, so a run inside 64× is not drawn on an axis to 2^20."""
    found = probes["horizon"].dropna()
    longest = int(found.max()) if len(found) else 0
    return ceiling if longest >= ceiling else min(ceiling, max(NEAR_MULTIPLE * train_length, 2 * longest))


def watch(view: LiveView, run_id: str, height: int | None = None, notes=None) -> None:
    """The carrier and the attention map at 4× from the weights at a recent step, captioned from them (each chart
    `height` px tall when given; the captions in `notes` when given, else under each chart)."""
    heatmap = view.heatmap
    L, k = heatmap.train_length, heatmap.offset
    left, right = st.columns(2)
    what = "s(Δ)" + (" read from the weights" if view.analytic else ", measured from recorded logits,")
    if view.head is not None:  # a transformer: the head that attends most to t − k, found anew at each view
        layer, head = view.head
        what = (f"s(Δ) of head L{layer}H{head}, the head putting most weight on t − k now "
                f"({view.target_weight:.2f} on average), measured from recorded logits,")
    when = "before the first step (the untrained model)" if view.step == 0 else f"at step {view.step}"
    with left:
        present_chart(charts.carrier_curve(view.offsets, view.carrier, L, k), height, "live-carrier", titled=False)
    (notes or left).caption(f"**What to look for, {when}:** " + mechanism_captions.alignment_caption(
        what, view.carrier, L, k, rope_softmax=False, learned=None) + ".")
    with right:
        present_chart(charts.attention_map(heatmap.weights, heatmap.pool, heatmap.length, L), height, "live-heatmap",
                      titled=False)
    trace = attention_captions.argmax_trace(heatmap.argmax_keys, L, k)
    (notes or right).caption(f"**{when[0].upper()}{when[1:]}:** "
                             f"{attention_captions.trace_caption(trace, None, None, view.task == 'retrieval')}")


def stored_training(run: Run) -> None:
    """A stored run's training: loss and batch accuracy, and (if it was probed) its predicted horizon and m_out."""
    st.subheader(f"Training of the selected run `{run.run_id}`")
    history = pd.DataFrame({key: run.history[key] for key in STEP_KEYS})
    chart(charts.training_curve(history, max(run.steps, 1)),  # the axis follows the steps done
          accuracy_captions.training_caption(run.steps, run.train_seconds, run.training_device, run.stopped_early,
                                             run.train_accuracy, run.verdict, run.config.task.train_length),
          history, "training-history")
    L = run.config.task.train_length
    if run.history.get("probe_step"):
        probes = pd.DataFrame({key: run.history[key] for key in PROBE_KEYS})
        cost = probe_cost(run.history["probe_seconds"], run.train_seconds) if "probe_seconds" in run.history else ""
        chart(charts.probe_curve(probes, max(run.steps, 1), L), f"{probe_caption(probes, L, NEAR_MULTIPLE * L)} {cost}",
              probes, "training-horizon", run.run_id)
    elif "probe_step" in run.history:  # probed, but no probe fitted the cost rule
        st.caption(f"This run's horizon was not probed while it trained: the live probes may take at most "
                   f"{PROBE_SHARE:.0%} of the steps' time, and its {run.steps:,} steps "
                   f"({run.train_seconds:.1f} s) did not leave room for one (a probe of this config: about "
                   f"{probe_seconds_estimate(run.config):.1f} s on one CPU thread). The Dilution page predicts "
                   "and measures its horizon.")


def probe_caption(probes: pd.DataFrame, train_length: int, ceiling: int) -> str:
    """Where the predicted horizon and m_out started and where they are now, from the probes so far."""
    def horizon(value) -> str:
        if value is None or pd.isna(value):
            return f"none (below {ACCURACY_BAR:g} at the training length)"
        if value >= ceiling:
            return f"≥ {ceiling:,} tokens, the most this view looks at"
        return f"{int(value):,} tokens ({value / train_length:.1f}× the training length)"

    first, last = probes.iloc[0], probes.iloc[-1]
    text = f"every few dozen steps the weights predict how far the run reaches: at step {int(first['probe_step']):,} "
    text += horizon(first["horizon"]) if len(probes) == 1 else (
        f"{horizon(first['horizon'])}, at step {int(last['probe_step']):,} {horizon(last['horizon'])}")
    margins = probes["m_out"].dropna()
    if len(margins) >= 2:
        text += f"; m_out {margins.iloc[0]:.2f} → {margins.iloc[-1]:.2f} nats"
    return text + (". Accuracy at the training length can reach 1 long before the horizon stops moving; the "
                   "Dilution page measures the finished run's horizon exactly.")


def probe_cost(probe_seconds: list[float], train_seconds: float) -> str:
    """'The 4 probes took 0.3 s, 9% of the steps' 3.4 s (...)': the cost rule of lengen_core.training, which
    admits a probe on its expected time, so the share spent can pass the rule's."""
    spent, count = sum(probe_seconds), len(probe_seconds)
    return (f"The {count} probe{'s' * (count != 1)} took {spent:.1f} s, {spent / max(train_seconds, 1e-9):.0%} of "
            f"the steps' {train_seconds:.1f} s (a probe runs only once its expected time fits in {PROBE_SHARE:.0%} of the "
            "steps' time; the time it then takes may run over).")


def live_curve(history: dict[str, list[float]], steps_done: int) -> go.Figure:
    """The curve so far, its x-axis ending at the steps done: a run that stops early (or has just
    begun) fills the width instead of hugging the left of the configured step count."""
    recorded = int(max(history["step"], default=0))
    steps = pd.DataFrame({key: history[key] for key in STEP_KEYS})  # the probes have their own, fewer rows
    return charts.training_curve(steps, max(steps_done, recorded, 1))



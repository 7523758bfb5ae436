"""The live view of a training on the shared pool: place in line, progress, curve, Stop.

A waiting request refreshes every `WAITING_SECONDS` (its place in line changes slowly, and a class
of waiting tabs should not cost the server a rerun each half second); a running one every
`LIVE_SECONDS` (so does a request about to take a free slot). The interval is set when the page is
drawn, so the move from waiting to running redraws the page once to switch to the faster one.
"""

from __future__ import annotations

import contextlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lengen_core.analysis.horizon import NEAR_MULTIPLE, probe_seconds_estimate
from lengen_core.analysis.watch import LiveView
from lengen_core.config import DELAY_TASKS, RunConfig
from lengen_core.serving.jobs import JobStatus, SharedTraining, TrainingPool
from lengen_core.serving.ray_pool import ClusterUnreachable
from lengen_core.serving.stepping import MAX_STEPS_PER_SECOND, PaceError
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import PROBE_SHARE, Run
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import mechanism as mechanism_captions
from ui.charts import common as charts
from ui.runs import stores
from ui.state import select_run
from ui.training.pool import let_go, rejoin
from ui.widgets import chart, present_chart

TICKET_KEY, MESSAGE_KEY = "training_ticket", "training_message"
PACE_KEY, PACE_ERROR_KEY = "pace-training", "_pace_refused"
PROBE_KEYS = ("probe_step", "horizon", "m_out")
STEP_KEYS = ("step", "loss", "accuracy")
LIVE_SECONDS, WAITING_SECONDS = 0.5, 2.0
FIRST_STEP_SECONDS = 0.3


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def live_training(pool: TrainingPool, height: int | None = None) -> None:
    """Show this session's training, if it has one, refreshing by itself until it ends; with `height`, its four
    charts that many px tall, two by two (a lesson on a projector)."""
    rejoin(pool, TICKET_KEY)
    ticket = st.session_state.get(TICKET_KEY)
    if ticket is None:
        return
    try:
        counts = pool.counts()  # queued behind a full pool: it really waits (else it starts at once)
        waiting = pool.status(ticket).state == "queued" and counts["running"] >= counts["limit"]
    except (KeyError, ClusterUnreachable):
        waiting = False  # the fragment says what happened
    st.fragment(run_every=WAITING_SECONDS if waiting else LIVE_SECONDS)(_live)(pool, waiting, height)


def _live(pool: TrainingPool, drawn_waiting: bool, height: int | None = None) -> None:
    ticket = st.session_state.get(TICKET_KEY)
    if ticket is None:
        return
    try:
        status = pool.status(ticket)
    except KeyError:  # released by the server, e.g. after the session was away too long
        del st.session_state[TICKET_KEY]
        st.warning("This training was released by the server; press Train to ask again.")
        return
    except ClusterUnreachable as error:  # the cluster's pool (LENGEN_RAY_ADDRESS) stopped answering
        st.error(f"This training cannot be followed now: {error}.", icon=":material/cloud_off:")
        return
    if status.state == "running" and status.progress is None and not status.paused:
        status = pool.status_after_first_step(ticket, FIRST_STEP_SECONDS)  # its first step is milliseconds away
    if status.state not in ("queued", "running"):
        _finish(ticket, status)
    if drawn_waiting and status.state != "queued":
        st.rerun()  # it started: redraw with the live interval
    if status.state == "queued":
        counts = pool.counts()
        running = counts["running"]
        st.info(f"Waiting: **{ordinal(status.position)} in line**; {running} training{'s' * (running != 1)} "
                f"running (at most {counts['limit']} at once). It starts by itself; keep this tab open.",
                icon=":material/hourglass_top:")
    elif status.progress is None:
        st.progress(0.0, text="Paused before its first step: press Step for one step, or Resume" if status.paused
                    else "Starting…")
    elif status.measuring:  # trained: measured once at the pages' default request before it is saved
        st.progress(1.0, text=f"Trained ({status.progress.step} steps) · measuring… the evaluations, prediction, law and "
                              "horizon that Dilution and Compare show first, so those pages open at once")
    else:
        st.progress(status.progress.step / status.progress.total_steps, text=progress_text(status))
    controls(pool, ticket, status, compact=height is not None)
    if status.view is not None:
        watch(status.view, status.run_id, height)
    losses, horizons = st.columns(2) if height else (st.container(), st.container())
    if status.progress is not None and status.history["step"]:
        with losses:
            present_chart(live_curve(status.history, status.progress.step), height, "live-curve", titled=False)
            st.caption("**What to look for:** the loss falls and the batch accuracy climbs to 1; RoPE and learned "
                       "positions both fit the training length, the difference shows only at longer lengths.")
    if status.progress is not None and status.history.get("probe_step"):
        probes = pd.DataFrame({key: status.history[key] for key in PROBE_KEYS})
        train_length, ceiling = status.history["train_length"][-1], status.history["probe_ceiling"][-1]
        cost = "" if height else probe_cost(status.history["probe_seconds"], status.progress.elapsed_seconds)
        with horizons:  # (on a projector, without what the probes cost the server: the class needs the rest)
            present_chart(charts.probe_curve(probes, status.progress.step, train_length), height, "live-probe",
                          titled=False)
            st.caption(f"**What to look for:** {probe_caption(probes, train_length, ceiling)} {cost}")


def progress_text(status: JobStatus) -> str:
    """'step 40/1500 · 10 steps/s (its pace; 180 it could) · at most 146 s left · loss 0.912 · accuracy 0.64'."""
    p = status.progress
    pace = status.steps_per_second
    rate = min(p.steps_per_second, pace) if pace else p.steps_per_second
    left = (p.total_steps - p.step) / max(rate, 1e-9)
    speed = (f"{rate:.0f} steps/s" if not pace else
             f"paced at {pace:g} steps/s ({p.steps_per_second:.0f} unpaced)" if pace < p.steps_per_second else
             f"{rate:.0f} steps/s (slower than its pace of {pace:g})")
    where = (f"paused at step {p.step}/{p.total_steps}" if status.paused else
             f"step {p.step}/{p.total_steps} · {speed} · at most {left:.0f} s left")
    return f"{where} · loss {p.loss:.3f} · accuracy {p.accuracy:.2f}"


def open_trained_run(config: RunConfig) -> None:
    """A button that opens `config`'s stored run on the page that reads it (Delays for a delay task, Dilution
    for a single head, else Transformer), shown only while this session has no training waiting, running or paused: beside a live
    training the only run with controls is that one."""
    run_id = config.run_id()
    if TICKET_KEY in st.session_state or not any(store.exists(run_id) for store in stores()):
        return
    page, title = (("pages/delays.py", "Delays") if config.task.task in DELAY_TASKS else
                   ("pages/dilution.py", "Dilution") if config.single_head else ("pages/transformer.py", "Transformer"))
    if st.button(f"Open the trained run on the {title} page", icon=":material/open_in_new:", key="lesson-open-run",
                 help=f"Select run {run_id} and open the {title} page."):
        select_run(run_id)
        st.switch_page(page)


def controls(pool: TrainingPool, ticket: int, status: JobStatus, compact: bool = False) -> None:
    """Pause or resume; while paused, one step or ten at a time (exactly that many); Stop; the pace (not when
    `compact`: a projector's live view, whose lesson and form set it). A training shared
    with other requests for the same run (a class on one link) is driven by the one that asked first: the
    others watch it, and their Leave lets go of it without stopping it for the rest."""
    running, drives = status.state == "running", status.drives
    shared = "" if drives else (f" This training is shared with {status.holders - 1} other request"
                                f"{'s' * (status.holders != 2)} for the same run: the one that asked first drives it.")
    pause, one, ten, stop = st.columns(4)
    if status.paused:
        pause.button("Resume", icon=":material/play_arrow:", on_click=_command, args=(pool.resume, ticket), key="resume-training",
                     width="stretch", disabled=not drives, help="Go on training from here, as if it had never paused." + shared)
    else:
        pause.button("Pause", icon=":material/pause:", on_click=_command, args=(pool.pause, ticket), key="pause-training",
                     width="stretch", disabled=not (running and drives), help="Hold the training before its next step." + shared)
    one.button("Step", icon=":material/skip_next:", on_click=_command, args=(pool.advance, ticket, 1), key="step-training",
               width="stretch", disabled=not (status.paused and drives),
               help="While paused: exactly one more step, then pause." + shared)
    ten.button("10 steps", icon=":material/fast_forward:", on_click=_command, args=(pool.advance, ticket, 10),
               key="step10-training", width="stretch", disabled=not (status.paused and drives),
               help="While paused: exactly ten more steps, then pause." + shared)
    if drives:
        stop.button("Stop", on_click=_command, args=(pool.stop, ticket), key="stop-training", width="stretch",
                    help="Stop now; the run so far is saved with steps set to the steps done (a waiting request is dropped).")
    else:
        stop.button("Leave", on_click=_leave, args=(ticket,), key="leave-training", width="stretch",
                    help="Stop watching it here; it goes on for the others, and its run is stored when it ends." + shared)
    if status.state == "running" and not compact:  # a projector's live view: the lesson and the form set the pace
        key = f"{PACE_KEY}-{ticket}"  # one per training; set once: a refresh must not undo a person's typing
        st.session_state.setdefault(key, status.steps_per_second)
        st.number_input("Steps per second while it trains", 0.0, MAX_STEPS_PER_SECOND,
                        step=1.0, format="%.1f", key=key, on_change=_set_pace, args=(pool, ticket),
                        disabled=not drives, help="Change the pace now (0: as fast as this server can): the next step already goes at it." + shared)
        if (refused := st.session_state.pop(PACE_ERROR_KEY, None)) is not None:
            st.warning(f"Pace not changed: {refused}.", icon=":material/error:")
    if not drives:
        st.caption(shared.strip())


def _command(action, ticket: int, *args) -> None:
    """A control's click: `action(ticket, *args)` on the pool; a cluster that stopped answering (LENGEN_RAY_ADDRESS)
    or a ticket the pool let go of is a message on the next run, not a traceback."""
    try:
        action(ticket, *args)
    except ClusterUnreachable as error:
        st.session_state[MESSAGE_KEY] = ("error", f"The training cluster did not take the command: {error}")
    except KeyError:
        st.session_state[MESSAGE_KEY] = ("warning", "This training is no longer held by the server; press Train to ask again.")


def _set_pace(pool: TrainingPool, ticket: int) -> None:
    key = f"{PACE_KEY}-{ticket}"
    try:
        pool.set_pace(ticket, st.session_state[key])
    except (PaceError, SharedTraining, KeyError, ClusterUnreachable) as error:
        st.session_state[PACE_ERROR_KEY] = str(error).strip("'")
        with contextlib.suppress(KeyError, ClusterUnreachable):
            st.session_state[key] = pool.status(ticket).steps_per_second  # the pace it keeps


def _leave(ticket: int) -> None:
    let_go(ticket)
    st.session_state.pop(TICKET_KEY, None)
    left = ("You left the shared training; it goes on for the others. Press Train on the same settings to watch "
            "it again, or to open its run once it is stored.")
    st.session_state[MESSAGE_KEY] = ("info", left)


def watch(view: LiveView, run_id: str, height: int | None = None) -> None:
    """The carrier and the attention map at 4× from the weights at a recent step, captioned from them (each chart
    `height` px tall when given)."""
    heatmap = view.heatmap
    L, k = heatmap.train_length, heatmap.offset
    left, right = st.columns(2)
    what = "s(Δ)" + (" read from the weights" if view.analytic else ", measured from recorded logits,")
    if view.head is not None:  # a transformer: the head that attends most to t − k, found anew at each view
        layer, head = view.head
        what = (f"s(Δ) of head L{layer}H{head}, the head putting most weight on t − k now "
                f"({view.target_weight:.2f} on average), measured from recorded logits,")
    with left:
        present_chart(charts.carrier_curve(view.offsets, view.carrier, L, k), height, "live-carrier", titled=False)
        st.caption(f"**What to look for, at step {view.step}:** " + mechanism_captions.alignment_caption(
            what, view.carrier, L, k, rope_softmax=False, learned=None) + ".")
    with right:
        present_chart(charts.attention_map(heatmap.weights, heatmap.pool, heatmap.length, L), height, "live-heatmap",
                      titled=False)
        trace = attention_captions.argmax_trace(heatmap.argmax_keys, L, k)
        st.caption(f"**At step {view.step}:** {attention_captions.trace_caption(trace, None, None, True)}")


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


def _finish(ticket: int, status: JobStatus) -> None:
    """The job is over: release the ticket, select the run, say what happened, redraw the app."""
    let_go(ticket)
    del st.session_state[TICKET_KEY]
    if status.state == "failed":
        st.session_state[MESSAGE_KEY] = ("error", f"Training failed: {status.error}")
    elif status.state == "cancelled" or status.stored_run_id is None:
        st.session_state[MESSAGE_KEY] = ("info", "The training was cancelled and nothing was saved; press Train to ask again.")
    else:
        select_run(status.stored_run_id)
        verb = "This config and seed were already trained: opened" if status.from_store else (
            "Stopped: saved and selected" if status.stopped else "Finished: saved and selected")
        text = f"{verb} run `{status.stored_run_id}`. Open the other pages to see it."
        if status.note:  # stopped at the server's wall-clock limit: say so, and what was kept
            st.session_state[MESSAGE_KEY] = ("warning", f"{verb} run `{status.stored_run_id}`: {status.note}.")
        else:
            st.session_state[MESSAGE_KEY] = ("success", text)
    st.rerun()

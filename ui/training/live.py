"""The live view of a training on the shared pool: place in line, progress, curve, Stop.

A waiting request refreshes every `WAITING_SECONDS` (its place in line changes slowly, and a class
of waiting tabs should not cost the server a rerun each half second); a running one every
`LIVE_SECONDS` (so does a request about to take a free slot). The interval is set when the page is
drawn, so the move from waiting to running redraws the page once to switch to the faster one.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from lengen.jobs import JobStatus, SharedTraining, TrainingPool
from lengen.ray_pool import ClusterUnreachable
from lengen.stepping import MAX_STEPS_PER_SECOND, PaceError
from lengen_core.config import RunConfig
from ui.runs import is_stored
from ui.state import select_run
from ui.training.ending import CAPTIONS, FINAL_KEY, PRESENT_PARAM, final_frame, run_page
from ui.training.frames import frame, live_curve, stored_training  # noqa: F401 (the Train page's, a test's)
from ui.training.pool import let_go, rejoin

TICKET_KEY, MESSAGE_KEY = "training_ticket", "training_message"
CLASS_RUNS_KEY = "trained_here"  # the run ids this session trained, oldest first
PACE_KEY, PACE_ERROR_KEY = "pace-training", "_pace_refused"
LIVE_SECONDS, WAITING_SECONDS = 0.5, 2.0
COMPACT_COLUMNS = [1.05, 0.85, 1.05, 0.75, 1.3]  # a projector's row: Resume, Step, 10 steps, Stop, Captions
FIRST_STEP_SECONDS = 0.3


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def live_training(pool: TrainingPool, height: int | None = None, config: RunConfig | None = None) -> None:
    """Show this session's training, if it has one, refreshing by itself until it ends; with `height`, its four
    charts that many px tall, two by two (a lesson on a projector). With `config` (a lesson's run), the
    untrained model is drawn before the first step, and once the training ends its last frame stays, with
    the run's verdict and a button that opens it (`final_frame`)."""
    rejoin(pool, TICKET_KEY)
    ticket = st.session_state.get(TICKET_KEY)
    if ticket is None:
        if config is not None:
            final_frame(config, height)
        return
    try:
        counts = pool.counts()  # queued behind a full pool: it really waits (else it starts at once)
        waiting = pool.status(ticket).state == "queued" and counts["running"] >= counts["limit"]
    except (KeyError, ClusterUnreachable):
        waiting = False  # the fragment says what happened
    st.fragment(run_every=WAITING_SECONDS if waiting else LIVE_SECONDS)(_live)(pool, waiting, height, config)


def _live(pool: TrainingPool, drawn_waiting: bool, height: int | None = None, config: RunConfig | None = None) -> None:
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
        _finish(ticket, status, config)
    if drawn_waiting and status.state != "queued":
        st.rerun()  # it started: redraw with the live interval
    status_line(pool, status)
    frame(status, height, config, controls(pool, ticket, status, compact=height is not None))


def status_line(pool: TrainingPool, status: JobStatus) -> None:
    """Its place in line, or its progress (paused before its first step)."""
    if status.state == "queued":
        counts = pool.counts()
        running = counts["running"]
        st.info(f"Waiting: **{ordinal(status.position)} in line**; {running} training{'s' * (running != 1)} "
                f"running (at most {counts['limit']} at once). It starts by itself; keep this tab open.",
                icon=":material/hourglass_top:")
    elif status.progress is None:
        st.progress(0.0, text="Paused before its first step, the untrained model: Step or Resume" if status.paused
                    else "Starting…")
    else:
        st.progress(status.progress.step / status.progress.total_steps, text=progress_text(status))


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


def open_trained_run(config: RunConfig, present: bool = False) -> None:
    """A button that opens `config`'s stored run on the page that reads it (`run_page`), shown only while this
    session has no training waiting, running or paused (beside a live training the only run with controls is
    that one) and no last frame of it (`final_frame` has its own)."""
    run_id = config.run_id()
    kept = st.session_state.get(FINAL_KEY)
    if (TICKET_KEY in st.session_state or (kept is not None and kept[0] == config)
            or not is_stored(run_id)):
        return
    page, title = run_page(config)
    if st.button(f"Open the trained run on the {title} page", icon=":material/open_in_new:", key="lesson-open-run",
                 help=f"Select run {run_id} and open the {title} page."):
        select_run(run_id)
        st.switch_page(page, query_params={PRESENT_PARAM: "1"} if present else None)


def controls(pool: TrainingPool, ticket: int, status: JobStatus, compact: bool = False):
    """Pause or resume; while paused, one step or ten at a time (exactly that many); Stop; the pace (not when
    `compact`: a projector's live view, whose lesson and form set it; there the buttons have no tooltips, which
    would cover the status line over them, and a fifth slot holds the charts' captions, folded: returned). A training
    shared with other requests for the same run (a class on one link) is driven by the one that asked first: the
    others watch it, and their Leave lets go of it without stopping it for the rest."""
    running, drives = status.state == "running", status.drives
    shared = "" if drives else (f" This training is shared with {status.holders - 1} other request"
                                f"{'s' * (status.holders != 2)} for the same run: the one that asked first drives it.")

    def tip(text: str) -> str | None:
        return None if compact else text + shared

    pause, one, ten, stop, *more = st.columns(COMPACT_COLUMNS if compact else 4)
    if status.paused:
        pause.button("Resume", icon=":material/play_arrow:", on_click=_command, args=(pool.resume, ticket), key="resume-training",
                     width="stretch", disabled=not drives, help=tip("Go on training from here, as if it had never paused."))
    else:
        pause.button("Pause", icon=":material/pause:", on_click=_command, args=(pool.pause, ticket), key="pause-training",
                     width="stretch", disabled=not (running and drives), help=tip("Hold the training before its next step."))
    one.button("Step", icon=":material/skip_next:", on_click=_command, args=(pool.advance, ticket, 1), key="step-training",
               width="stretch", disabled=not (status.paused and drives),
               help=tip("While paused: exactly one more step, then pause."))
    ten.button("10 steps", icon=":material/fast_forward:", on_click=_command, args=(pool.advance, ticket, 10),
               key="step10-training", width="stretch", disabled=not (status.paused and drives),
               help=tip("While paused: exactly ten more steps, then pause."))
    if drives:
        stop.button("Stop", on_click=_command, args=(pool.stop, ticket), key="stop-training", width="stretch",
                    help=tip("Stop now; the run so far is saved with steps set to the steps done (a waiting request is dropped)."))
    else:
        stop.button("Leave", on_click=_leave, args=(ticket,), key="leave-training", width="stretch",
                    help=tip("Stop watching it here; it goes on for the others, and its run is stored when it ends."))
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
    return more[0].popover(CAPTIONS, icon=":material/info:", width="stretch") if more else None


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


def _finish(ticket: int, status: JobStatus, config: RunConfig | None = None) -> None:
    """The job is over: release the ticket, select the run, say what happened, redraw the app. A lesson's
    training (`config`) keeps its last frame (`FINAL_KEY`), which says what happened in place of the message,
    and a stored run joins the session's (`CLASS_RUNS_KEY`)."""
    let_go(ticket)
    del st.session_state[TICKET_KEY]
    if status.state == "failed":
        st.session_state[MESSAGE_KEY] = ("error", f"Training failed: {status.error}")
    elif status.state == "cancelled" or status.stored_run_id is None:
        st.session_state[MESSAGE_KEY] = ("info", "The training was cancelled and nothing was saved; press Train to ask again.")
    else:
        select_run(status.stored_run_id)
        trained = st.session_state.setdefault(CLASS_RUNS_KEY, [])
        if status.stored_run_id not in trained:
            trained.append(status.stored_run_id)
        verb = "This config and seed were already trained: opened" if status.from_store else (
            "Stopped: saved and selected" if status.stopped else "Finished: saved and selected")
        text = f"{verb} run `{status.stored_run_id}`. Open the other pages to see it."
        if config is not None:  # the frame stays, and says it
            st.session_state[FINAL_KEY] = (config, status)
        if status.note:  # stopped at the server's wall-clock limit: say so, and what was kept
            st.session_state[MESSAGE_KEY] = ("warning", f"{verb} run `{status.stored_run_id}`: {status.note}.")
        elif config is None:
            st.session_state[MESSAGE_KEY] = ("success", text)
    st.rerun()

"""The Train form: every setting of a run, its cost before anyone presses Train, and the request to the
shared pool. The Train page draws all of it; a lesson step draws it prefilled with the lesson's config,
showing only the settings the lesson sets (presenter mode) and locking them on a students' link."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

import streamlit as st

from lengen.budget import (
    BudgetError,
    Budgets,
    check,
    duration,
    shortest_training_steps,
    step_seconds,
    training_cost,
)
from lengen.calibration import Speed
from lengen.jobs import OwnerBusy, QueueFull, TrainingPool
from lengen.ray_pool import ClusterUnreachable
from lengen.stepping import MAX_STEPS_PER_SECOND, MIN_STEPS_PER_SECOND, UNPACED, Pace, PaceError
from lengen.store import StoreError
from lengen_core.config import SETTINGS, ConfigError, RunConfig, with_changes
from ui.runs import load_run
from ui.state import linked_config, plain, select_run, selected_run_id
from ui.training.live import MESSAGE_KEY, TICKET_KEY
from ui.training.own_run import offer_own_run, stored
from ui.training.pool import browser_id, hold, training_pool

LOG = logging.getLogger(__name__)
PREFILLED_KEY, PACE_PREFILLED_KEY = "_train_prefilled", "_train_pace_prefilled"
VALUES_KEY = "_train_values"  # the form's values, kept where Streamlit never cleans up (widget keys it does)
FORM = {  # setting -> widget key; the widgets start from a link's config when one is waiting
    "task": "train-task", "encoding": "train-encoding", "attention": "train-attention", "offset": "train-offset",
    "train_length": "train-length", "length_mode": "train-length-mode", "vocab_size": "train-vocab",
    "d_model": "train-d-model", "n_layers": "train-layers", "n_heads": "train-heads", "steps": "train-steps",
    "learning_rate": "train-lr", "seed": "train-seed", "qk_init": "train-qk-init", "delays": "train-delays",
}
COLUMNS = (("task", "delays", "encoding", "attention", "offset"), ("train_length", "length_mode", "vocab_size", "n_layers",
                                                         "n_heads"), ("d_model", "qk_init", "steps", "learning_rate",
                                                                      "seed"))
S = SETTINGS  # the bounds and choices are the config's own (lengen_core.config.SETTINGS)
HELP = {
    "task": "retrieval: answer x[L−1−k] at the last position; shift: every position answers k back; delay-copy and "
            "selective-copy: the answer lies a delay back, the length stays fixed (the Delays page).",
    "delays": "delay-copy and selective-copy only: the delays training draws from, e.g. 2-8 or 2,4,8 (each below "
              "the training length); empty for retrieval and shift.",
    "encoding": "rope: relative rotations (C1, C3); learned: a trained absolute table (C4).",
    "attention": "linear: no softmax normalisation, the C7 control.",
    "offset": "The answer is the token k places before the query.",
    "train_length": "Length of the training sequences (the maximum when sampled).",
    "length_mode": "sampled: each batch draws a length from k+1 to the training length.",
    "vocab_size": "Content tokens; chance is 1/V.",
    "n_layers": "0: the minimal single head of the science (one head); 1 or more: a transformer (C8).",
    "n_heads": "Heads per layer; the minimal model (layers 0) has one.",
    "d_model": "Width of the model; must be divisible by 2 × heads for the rotary pairs.",
    "qk_init": "W_Q and W_K drawn this many times their usual scale. The default (0.1, with d_model 128) is the "
               "recipe that shows RoPE at its best; 1.0 was the default before it.",
    "steps": "Most optimisation steps (Adam).", "learning_rate": "Adam's step size.",
    "seed": "Every random stream derives from it.",
}
LABELS = {"task": "Task", "delays": "Training delays", "encoding": "Positional encoding", "attention": "Attention", "offset": "Offset k",
          "train_length": "Training length", "length_mode": "Length mode", "vocab_size": "Vocabulary V",
          "n_layers": "Layers", "n_heads": "Heads", "d_model": "Model width d_model",
          "qk_init": "Query-key init scale", "steps": "Steps", "learning_rate": "Learning rate", "seed": "Seed"}
FORMATS = {"qk_init": "%.3f", "learning_rate": "%.4f"}
PACE_FORM = {"start_paused": "train-start-paused", "steps_per_second": "train-pace"}  # how it goes live: not the run
PACE_HELP = {
    "start_paused": "The training waits before its first step: press Step to see one step at a time, or Resume. "
                    "Time paused is not counted against this server's limit per training.",
    "steps_per_second": f"At most this many steps a second, so a class can follow it: 0 trains as fast as this "
                        f"server can; otherwise {MIN_STEPS_PER_SECOND:g} to {MAX_STEPS_PER_SECOND:,.0f}. The weights "
                        "are the same at any pace.",
}


@dataclass(frozen=True)
class Choice:
    """What the form holds: the run, how it goes live, and whether Train was pressed."""

    config: RunConfig
    pace: Pace
    submitted: bool


def _bounds(name: str) -> tuple:
    setting = SETTINGS[name]
    return (setting.kind(setting.low), setting.kind(setting.high))


def _flat(config: RunConfig) -> dict:
    return {name: value for section in config.to_dict().values() for name, value in section.items()}


def _widget(where, name: str, locked: bool) -> None:
    key, label, about = FORM[name], LABELS[name], HELP[name] + (" Fixed by the lesson." if locked else "")
    if name == "delays":
        where.text_input(label, key=key, help=about, disabled=locked, placeholder="e.g. 2-8")
    elif S[name].choices and name == "length_mode":
        where.radio(label, S[name].choices, horizontal=True, key=key, help=about, disabled=locked)
    elif S[name].choices:
        where.selectbox(label, S[name].choices, key=key, help=about, disabled=locked)
    else:
        where.number_input(label, *_bounds(name), key=key, help=about, disabled=locked, format=FORMATS.get(name),
                           step=2 if name == "d_model" else None)


def form_base() -> RunConfig:
    """What the Train form starts from: a link's config waiting to be trained; else the selected run's (the
    sidebar's, which a link to a stored run selects), as a new training of it; else the config it last started
    from; else the defaults. The form keeps a person's edits until this changes (`train_form`)."""
    return linked_config() or _selected_config() or st.session_state.get(PREFILLED_KEY) or RunConfig()


def _selected_config() -> RunConfig | None:
    """The selected run's config as a training from a random start: a run that continued another, or a head
    built by construction, is trained afresh with its settings (a construction's 0 steps: the default)."""
    run_id = selected_run_id()
    if run_id is None:
        return None
    try:
        config = load_run(run_id).config
    except StoreError:
        return None
    return with_changes(config, init="random", continues="", steps=config.train.steps or RunConfig().train.steps)


def _take_seed(seed: int) -> None:
    st.session_state[FORM["seed"]] = seed
    st.session_state[VALUES_KEY]["seed"] = seed



def train_form(base: RunConfig, shown: Collection[str] | None = None, locked: Collection[str] = (),
               pace: Pace = UNPACED) -> Choice | None:
    """The form, started from `base` and `pace` (again whenever they change); the settings in `shown` (all
    when None) are drawn, those in `locked` drawn disabled at `base`'s value; the others keep `base`'s. The
    pace (start paused, steps per second) is never locked, and drawn unless only some settings are shown
    (presenter mode) and `pace` is the default. Returns what the form holds,
    with whether Train was pressed; None for a bad config or pace, which is a message here."""
    flat = _flat(base)
    start = {**flat, "start_paused": pace.start_paused, "steps_per_second": pace.steps_per_second}
    if st.session_state.get(PREFILLED_KEY) != base or st.session_state.get(PACE_PREFILLED_KEY) != pace:
        st.session_state[VALUES_KEY] = dict(start)
        st.session_state[PREFILLED_KEY], st.session_state[PACE_PREFILLED_KEY] = base, pace
        for key in (FORM | PACE_FORM).values():  # the widgets too: a lesson's next step draws the same ones
            st.session_state.pop(key, None)
    kept = st.session_state.setdefault(VALUES_KEY, dict(start))
    for name, value in start.items():  # values kept before the form had these inputs
        kept.setdefault(name, value)
    for name in locked:  # a students' link: what the lesson fixes stays as the lesson set it
        if name in FORM:
            kept[name] = flat[name]
    # Streamlit deletes a widget's state on any run that does not draw it (another page), and the widget
    # then comes back at its minimum: every run restores the widgets from the kept values.
    for name, key in (FORM | PACE_FORM).items():
        if key not in st.session_state or name in locked:
            st.session_state[key] = kept[name]
    drawn = [name for name in FORM if shown is None or name in shown]
    with st.container(border=True):  # no form: the estimate below follows every change
        columns = st.columns(3) if shown is None else st.columns(max(1, min(3, len(drawn))))
        groups = COLUMNS if shown is None else [drawn[i::len(columns)] for i in range(len(columns))]
        for column, names in zip(columns, groups, strict=True):
            for name in names:
                _widget(column, name, name in locked)
        if shown is None or pace != UNPACED:  # presenter mode: only when the lesson sets a pace
            paused, rate = st.columns(2)
            paused.checkbox("Start paused", key=PACE_FORM["start_paused"], help=PACE_HELP["start_paused"])
            rate.number_input("Steps per second", 0.0, MAX_STEPS_PER_SECOND, step=1.0,
                              format="%.1f", key=PACE_FORM["steps_per_second"], help=PACE_HELP["steps_per_second"])
        estimate = st.empty()
        if shown is None:
            submitted = st.button("Train", type="primary", help="Start training, or open the stored run.")
            own = st.empty()  # under the button: when these settings are stored, what Train does and a seed of one's own
        else:  # a lesson on a projector: beside the button, in one line, so the step still fits the screen
            button, own = st.columns([1, 3], vertical_alignment="center")
            submitted = button.button("Train", type="primary")
    kept.update({name: st.session_state[FORM[name]] for name in drawn})
    kept.update({name: st.session_state[key] for name, key in PACE_FORM.items() if key in st.session_state})
    try:
        config = with_changes(base, **{name: st.session_state[FORM[name]] if name in drawn else flat[name]
                                       for name in FORM})
        chosen = Pace(bool(kept["start_paused"]), float(kept["steps_per_second"]))
    except PaceError as error:
        estimate.warning(f"Not a valid pace: {plain(str(error))}.", icon=":material/error:")
        if submitted:
            st.error(f"Cannot train at this pace: {plain(str(error))}")
        return None
    except ConfigError as error:
        estimate.warning(f"Not a valid configuration: {plain(str(error))}.", icon=":material/error:")
        if submitted:
            st.error(f"Cannot train this configuration: {plain(str(error))}")
        return None
    show_estimate(config, estimate, chosen, brief=shown is not None)
    offer_own_run(config, own, _take_seed if "seed" in drawn and "seed" not in locked else None, compact=shown is not None)
    return Choice(config, chosen, submitted)


UNMEASURED = ("the cost model's figure for a busy 2-core CPU, as this server's training speed is not measured yet "
              "(its training process times it as it starts), so it may be several times off")


def estimate_text(config: RunConfig, pace: Pace, measured: Speed | None, budgets: Budgets, brief: bool = False) -> str:
    """What a training of `config` at `pace` takes on this server: its step time (the cost model scaled by
    `measured`, the speed measured where trainings run; None: not yet, the model's own figure, said so), the
    most it can take (every step) and the least (early stopping needs `patience` steps at the target), its
    memory, and the server's limits. `brief`: the times only, in one line (presenter mode, where the form
    shares the projector with the live view)."""
    speed = measured.factor if measured is not None else 1.0
    cost = training_cost(config, pace, speed)
    steps, fewest = config.train.steps, shortest_training_steps(config)
    step = training_cost(config, speed=speed).seconds / max(steps, 1)
    if brief:
        least = duration(pace.seconds(min(fewest, steps), speed * step_seconds(config)))
        span = least if fewest >= steps else f"{least} to {duration(cost.seconds)}"
        return (f"Estimated time on this server: {span}" + (" (early stopping decides)" if fewest < steps else "")
                + ("" if measured is not None else " (cost model; this server's speed is not measured yet)")
                + (f", at most {pace.steps_per_second:g} steps a second" if pace.paced else "")
                + ("; starts paused." if pace.start_paused else "."))
    per_step = f"about {step * 1e3:,.0f} ms a step" if step < 1 else f"about {step:.1f} s a step"
    text = (f"Estimated on this server from its measured speed ({measured.source}): {per_step}" if measured is not None
            else f"Estimated from {UNMEASURED}: {per_step}")
    if pace.paced:
        slower = "the pace sets the time" if 1 / pace.steps_per_second > step else "the steps are slower than the pace"
        text += f", at most {pace.steps_per_second:g} a second ({slower})"
    if fewest < steps:
        text += (f", so at most {duration(cost.seconds)} for all {steps:,} steps; early stopping ends it once the "
                 f"batch accuracy has held at 100% for {config.train.patience:,} steps, so no sooner than "
                 f"{duration(pace.seconds(fewest, speed * step_seconds(config)))}")
    else:
        text += f", so about {duration(cost.seconds)} for its {steps:,} steps"
    if cost.seconds > budgets.train_seconds:
        text += f" (at this server's limit of {duration(budgets.train_seconds)} it is stopped, keeping its steps)"
    if pace.start_paused:
        text += "; it starts paused (time paused is not counted)"
    return (text + f". Memory: about {cost.memory_bytes / 2**20:,.0f} MB. This server's limits: "
            f"{budgets.memory_bytes / 2**20:,.0f} MB and {duration(budgets.train_seconds)} per training.")


def show_estimate(config: RunConfig, where, pace: Pace = UNPACED, brief: bool = False) -> None:
    """What `config` would cost at `pace`, before anyone presses Train, against this server's budgets
    (`brief`: the times only, estimate_text)."""
    try:
        budgets = Budgets.from_env()
        check(training_cost(config, pace), budgets)  # as the pool checks it: the model's time, not this load's
    except BudgetError as error:
        where.warning(f"Too costly for this server: {plain(str(error))}.", icon=":material/block:")
    else:
        where.caption(estimate_text(config, pace, measured_speed(config), budgets, brief))


def measured_speed(config: RunConfig) -> Speed | None:
    """The speed the pool measured where its trainings run (its training process, or the Ray cluster's
    Trainers), read here without timing anything: this script thread never trains (timing 8 steps here
    cost 1.8 CPU s with the interpreter lock held, most of it the first optimizer's `torch._dynamo` import).
    None until the first measurement arrives, or while the cluster does not answer."""
    try:
        return training_pool().training_speed(config)
    except ClusterUnreachable:
        return None


def request(pool: TrainingPool, config: RunConfig, pace: Pace = UNPACED) -> None:
    """Open the stored run at once, or take a ticket for it on the shared pool, to go at `pace`."""
    if stored(config):
        select_run(config.run_id())
        text = f"This config and seed were already trained: opened the stored run `{config.run_id()}`."
        st.session_state[MESSAGE_KEY] = ("success", text)
    elif TICKET_KEY in st.session_state:
        st.warning("Your earlier training is still running or waiting: stop it first.")
    else:
        try:
            ticket = pool.submit(config, owner=browser_id(), pace=pace)
        except (QueueFull, OwnerBusy) as error:
            st.error(f"The server is busy: {error}.")
            return
        except ClusterUnreachable as error:  # LENGEN_RAY_ADDRESS names a cluster that stopped answering
            st.error(f"Nothing was trained: {error}.", icon=":material/cloud_off:")
            return
        except ConfigError as error:  # over this server's budgets, or a continuation that changes the model
            st.error(f"Cannot train this configuration: {plain(str(error))}")
            return
        except StoreError as error:  # read-only, full or over-quota store: found before any training
            LOG.warning("a training was refused because the store cannot take it: %s", error)  # paths stay here
            st.error("This server cannot store a run of this config (its run store is read-only, full, or this run "
                     "alone is larger than its quota), so nothing was trained: try a smaller model or tell the "
                     "person who runs the server.")
            return
        st.session_state[TICKET_KEY] = ticket
        hold(ticket)


def show_message() -> None:
    """The message the last request or training left (opened, finished, failed), once."""
    if MESSAGE_KEY in st.session_state:
        kind, text = st.session_state.pop(MESSAGE_KEY)
        getattr(st, kind)(text)

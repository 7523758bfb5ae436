"""The Train form: every setting of a run, its cost before anyone presses Train, and the request to the
shared pool. The Train page draws all of it; a lesson step draws it prefilled with the lesson's config,
showing only the settings the lesson sets (presenter mode) and locking them on a students' link."""

from __future__ import annotations

import logging
from collections.abc import Collection

import streamlit as st

from lengen_core.config import SETTINGS, ConfigError, RunConfig, with_changes
from lengen_core.serving.budget import BudgetError, Budgets, check, duration, training_cost
from lengen_core.serving.jobs import OwnerBusy, QueueFull, TrainingPool
from lengen_core.serving.store import StoreError
from ui.runs import stores
from ui.state import plain, select_run
from ui.training.live import MESSAGE_KEY, TICKET_KEY
from ui.training.pool import browser_id, hold

LOG = logging.getLogger(__name__)
PREFILLED_KEY = "_train_prefilled"
VALUES_KEY = "_train_values"  # the form's values, kept where Streamlit never cleans up (widget keys it does)
FORM = {  # setting -> widget key; the widgets start from a link's config when one is waiting
    "task": "train-task", "encoding": "train-encoding", "attention": "train-attention", "offset": "train-offset",
    "train_length": "train-length", "length_mode": "train-length-mode", "vocab_size": "train-vocab",
    "d_model": "train-d-model", "n_layers": "train-layers", "n_heads": "train-heads", "steps": "train-steps",
    "learning_rate": "train-lr", "seed": "train-seed", "qk_init": "train-qk-init",
}
COLUMNS = (("task", "encoding", "attention", "offset"), ("train_length", "length_mode", "vocab_size", "n_layers",
                                                         "n_heads"), ("d_model", "qk_init", "steps", "learning_rate",
                                                                      "seed"))
S = SETTINGS  # the bounds and choices are the config's own (lengen_core.config.SETTINGS)
HELP = {
    "task": "retrieval: answer x[L−1−k] at the last position; shift: every position answers k back.",
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
LABELS = {"task": "Task", "encoding": "Positional encoding", "attention": "Attention", "offset": "Offset k",
          "train_length": "Training length", "length_mode": "Length mode", "vocab_size": "Vocabulary V",
          "n_layers": "Layers", "n_heads": "Heads", "d_model": "Model width d_model",
          "qk_init": "Query-key init scale", "steps": "Steps", "learning_rate": "Learning rate", "seed": "Seed"}
FORMATS = {"qk_init": "%.3f", "learning_rate": "%.4f"}


def _bounds(name: str) -> tuple:
    setting = SETTINGS[name]
    return (setting.kind(setting.low), setting.kind(setting.high))


def _flat(config: RunConfig) -> dict:
    return {name: value for section in config.to_dict().values() for name, value in section.items()}


def _widget(where, name: str, locked: bool) -> None:
    key, label, about = FORM[name], LABELS[name], HELP[name] + (" Fixed by the lesson." if locked else "")
    if S[name].choices and name == "length_mode":
        where.radio(label, S[name].choices, horizontal=True, key=key, help=about, disabled=locked)
    elif S[name].choices:
        where.selectbox(label, S[name].choices, key=key, help=about, disabled=locked)
    else:
        where.number_input(label, *_bounds(name), key=key, help=about, disabled=locked, format=FORMATS.get(name),
                           step=2 if name == "d_model" else None)


def train_form(base: RunConfig, shown: Collection[str] | None = None, locked: Collection[str] = ()) -> RunConfig | None:
    """The form, started from `base` (again whenever `base` changes); the settings in `shown` (all when
    None) are drawn, those in `locked` drawn disabled at `base`'s value; the others keep `base`'s.
    Returns the config to train when Train is pressed, else None; a bad config is a message here."""
    flat = _flat(base)
    if st.session_state.get(PREFILLED_KEY) != base:
        st.session_state[VALUES_KEY] = dict(flat)
        st.session_state[PREFILLED_KEY] = base
        for key in FORM.values():  # the widgets too: a lesson's next step draws the same ones, with their old values
            st.session_state.pop(key, None)
    kept = st.session_state.setdefault(VALUES_KEY, dict(flat))
    for name in locked:  # a students' link: what the lesson fixes stays as the lesson set it
        if name in FORM:
            kept[name] = flat[name]
    # Streamlit deletes a widget's state on any run that does not draw it (another page), and the widget
    # then comes back at its minimum: every run restores the widgets from the kept values.
    for name, key in FORM.items():
        if key not in st.session_state or name in locked:
            st.session_state[key] = kept[name]
    drawn = [name for name in FORM if shown is None or name in shown]
    with st.container(border=True):  # no form: the estimate below follows every change
        columns = st.columns(3) if shown is None else st.columns(max(1, min(3, len(drawn))))
        groups = COLUMNS if shown is None else [drawn[i::len(columns)] for i in range(len(columns))]
        for column, names in zip(columns, groups, strict=True):
            for name in names:
                _widget(column, name, name in locked)
        estimate = st.empty()
        submitted = st.button("Train", type="primary", help="Start training, or open the stored run.")
    kept.update({name: st.session_state[FORM[name]] for name in drawn})
    try:
        config = with_changes(base, **{name: st.session_state[FORM[name]] if name in drawn else flat[name]
                                       for name in FORM})
    except ConfigError as error:
        estimate.warning(f"Not a valid configuration: {plain(str(error))}.", icon=":material/error:")
        if submitted:
            st.error(f"Cannot train this configuration: {plain(str(error))}")
        return None
    show_estimate(config, estimate)
    return config if submitted else None


def show_estimate(config: RunConfig, where) -> None:
    """What `config` would cost, before anyone presses Train, against this server's budgets."""
    try:
        cost = training_cost(config)
        budgets = Budgets.from_env()
        check(cost, budgets)
    except BudgetError as error:
        where.warning(f"Too costly for this server: {plain(str(error))}.", icon=":material/block:")
    else:
        where.caption(f"Estimated for {config.train.steps:,} steps (early stopping only shortens it): about "
                      f"{cost.memory_bytes / 2**20:,.0f} MB of memory and {duration(cost.seconds)} on this server; "
                      f"its limits are {budgets.memory_bytes / 2**20:,.0f} MB and {duration(budgets.train_seconds)} "
                      "per training.")


def request(pool: TrainingPool, config: RunConfig) -> None:
    """Open the stored run at once, or take a ticket for it on the shared pool."""
    if any(store.exists(config.run_id()) for store in stores()):
        select_run(config.run_id())
        text = f"This config and seed were already trained: opened the stored run `{config.run_id()}`."
        st.session_state[MESSAGE_KEY] = ("success", text)
    elif TICKET_KEY in st.session_state:
        st.warning("Your earlier training is still running or waiting: stop it first.")
    else:
        try:
            ticket = pool.submit(config, owner=browser_id())
        except (QueueFull, OwnerBusy) as error:
            st.error(f"The server is busy: {error}.")
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

"""Train: choose a config, queue it on the shared pool, watch it live, stop it, open the run."""

import logging

import streamlit as st

from lengen_core.config import SETTINGS, ConfigError, RunConfig, with_changes
from lengen_core.serving.budget import BudgetError, Budgets, check, duration, training_cost
from lengen_core.serving.jobs import OwnerBusy, QueueFull
from lengen_core.serving.store import StoreError
from ui.glossary import lead
from ui.live import MESSAGE_KEY, TICKET_KEY, live_training, stored_training
from ui.pool import browser_id, hold, training_device_name, training_pool
from ui.runs import stores
from ui.state import linked_config, plain, select_run
from ui.widgets import selected_run

LOG = logging.getLogger(__name__)
PREFILLED_KEY = "_train_prefilled"
FORM = {  # setting -> widget key; the widgets start from a link's config when one is waiting
    "task": "train-task", "encoding": "train-encoding", "attention": "train-attention", "offset": "train-offset",
    "train_length": "train-length", "length_mode": "train-length-mode", "vocab_size": "train-vocab",
    "d_model": "train-d-model", "n_layers": "train-layers", "n_heads": "train-heads", "steps": "train-steps",
    "learning_rate": "train-lr", "seed": "train-seed", "qk_init": "train-qk-init",
}
S = SETTINGS  # the bounds and choices are the config's own (lengen_core.config.SETTINGS)


def bounds(name: str) -> tuple:
    setting = SETTINGS[name]
    return (setting.kind(setting.low), setting.kind(setting.high))


base = linked_config() or RunConfig()
if st.session_state.get(PREFILLED_KEY) != base:
    flat = {name: value for section in base.to_dict().values() for name, value in section.items()}
    for name, key in FORM.items():
        st.session_state[key] = flat[name]
    st.session_state[PREFILLED_KEY] = base


st.title("Train a run")
lead("train")
pool = training_pool()
st.caption(f"Device in use: **{training_device_name()}**. The task: answer the token k places before the "
           "last one (C2), or shift the whole sequence by k. Training stops early once the batch accuracy "
           f"holds at 100%. This server trains at most {pool.max_concurrent} runs at once; the rest wait in line.")

if base.train.continues:  # a link from Dilution's "Train longer"
    st.info(f"This run continues `{base.train.continues}`: it starts from that run's trained weights and trains "
            f"{base.train.steps:,} more steps, past 100% training accuracy. Keep its task and model as they are.",
            icon=":material/fitness_center:")
with st.container(border=True):  # no form: the estimate below follows every change
    left, middle, right = st.columns(3)
    left.selectbox("Task", S["task"].choices, key=FORM["task"],
                   help="retrieval: answer x[L−1−k] at the last position; shift: every position answers k back.")
    left.selectbox("Positional encoding", S["encoding"].choices, key=FORM["encoding"],
                   help="rope: relative rotations (C1, C3); learned: a trained absolute table (C4).")
    left.selectbox("Attention", S["attention"].choices, key=FORM["attention"],
                   help="linear: no softmax normalisation, the C7 control.")
    left.number_input("Offset k", *bounds("offset"), key=FORM["offset"], help="The answer is the token k places before the query.")
    middle.number_input("Training length", *bounds("train_length"), key=FORM["train_length"],
                        help="Length of the training sequences (the maximum when sampled).")
    middle.radio("Length mode", S["length_mode"].choices, horizontal=True, key=FORM["length_mode"],
                 help="sampled: each batch draws a length from k+1 to the training length.")
    middle.number_input("Vocabulary V", *bounds("vocab_size"), key=FORM["vocab_size"], help="Content tokens; chance is 1/V.")
    middle.number_input("Layers", *bounds("n_layers"), key=FORM["n_layers"],
                        help="0: the minimal single head of the science (one head); 1 or more: a transformer (C8).")
    middle.number_input("Heads", *bounds("n_heads"), key=FORM["n_heads"], help="Heads per layer; the minimal model (layers 0) has one.")
    right.number_input("Model width d_model", *bounds("d_model"), step=2, key=FORM["d_model"],
                       help="Width of the model; must be divisible by 2 × heads for the rotary pairs.")
    right.number_input("Query-key init scale", *bounds("qk_init"), format="%.3f", key=FORM["qk_init"],
                       help="W_Q and W_K drawn this many times their usual scale. The default (0.1, with d_model 128) "
                            "is the recipe that shows RoPE at its best; 1.0 was the default before it.")
    right.number_input("Steps", *bounds("steps"), key=FORM["steps"], help="Most optimisation steps (Adam).")
    right.number_input("Learning rate", *bounds("learning_rate"), format="%.4f", key=FORM["learning_rate"], help="Adam's step size.")
    right.number_input("Seed", *bounds("seed"), key=FORM["seed"], help="Every random stream derives from it.")
    estimate = st.empty()
    submitted = st.button("Train", type="primary", help="Start training, or open the stored run.")


def request(config: RunConfig) -> None:
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
        except StoreError as error:  # read-only, full or over-quota store: found before any training
            LOG.warning("a training was refused because the store cannot take it: %s", error)  # paths stay here
            st.error("This server cannot store a run of this config (its run store is read-only, full, or this run "
                     "alone is larger than its quota), so nothing was trained: try a smaller model or tell the "
                     "person who runs the server.")
            return
        st.session_state[TICKET_KEY] = ticket
        hold(ticket)


def show_estimate() -> None:
    """What the config in the form would cost, before anyone presses Train, against this server's budgets."""
    try:
        config = with_changes(base, **{name: st.session_state[key] for name, key in FORM.items()})
        cost = training_cost(config)
        budgets = Budgets.from_env()
        check(cost, budgets)
    except BudgetError as error:
        estimate.warning(f"Too costly for this server: {plain(str(error))}.", icon=":material/block:")
    except ConfigError as error:
        estimate.warning(f"Not a valid configuration: {plain(str(error))}.", icon=":material/error:")
    else:
        estimate.caption(f"Estimated for {config.train.steps:,} steps (early stopping only shortens it): about "
                         f"{cost.memory_bytes / 2**20:,.0f} MB of memory and {duration(cost.seconds)} on this server; "
                         f"its limits are {budgets.memory_bytes / 2**20:,.0f} MB and {duration(budgets.train_seconds)} "
                         "per training.")


show_estimate()
if submitted:
    try:
        request(with_changes(base, **{name: st.session_state[key] for name, key in FORM.items()}))
    except ConfigError as error:
        st.error(f"Cannot train this configuration: {plain(str(error))}")

if MESSAGE_KEY in st.session_state:
    kind, text = st.session_state.pop(MESSAGE_KEY)
    getattr(st, kind)(text)


live_training(pool)

if TICKET_KEY not in st.session_state and linked_config() is None and (run := selected_run()) is not None:
    stored_training(run)

"""Train: choose a config, train in a background worker, watch it live, stop it, open the run."""

import pandas as pd
import streamlit as st

from lengen_core.config import ConfigError, RunConfig, with_changes
from lengen_core.store import RunStore
from lengen_core.training import resolve_device
from ui import charts
from ui.state import select_run
from ui.widgets import chart, selected_run
from ui.worker import TrainingJob

JOB_KEY, MESSAGE_KEY = "training_job", "training_message"
default = RunConfig()

st.title("Train a run")
st.caption(f"Device in use: **{resolve_device('auto')}**. The task: answer the token k places before the "
           "last one (C2). Training stops early once the batch accuracy holds at 100%.")

with st.form("config"):
    left, middle, right = st.columns(3)
    encoding = left.selectbox("Positional encoding", ["rope", "learned", "sinusoidal", "alibi", "nope"],
                              help="rope: relative rotations (C1, C3); learned: a trained absolute table (C4).")
    attention = left.selectbox("Attention", ["softmax", "linear"],
                               help="linear: no softmax normalisation, the C7 control.")
    offset = left.number_input("Offset k", 1, 511, default.task.offset, help="The answer is the token k places before the query.")
    train_length = middle.number_input("Training length", 2, 512, default.task.train_length,
                                       help="Length of the training sequences (the maximum when sampled).")
    length_mode = middle.radio("Length mode", ["fixed", "sampled"], horizontal=True,
                               help="sampled: each batch draws a length from k+1 to the training length.")
    vocab_size = middle.number_input("Vocabulary V", 2, 64, default.task.vocab_size, help="Content tokens; chance is 1/V.")
    d_model = right.number_input("Model width d_model", 4, 512, default.model.d_model, step=2,
                                 help="Width of the head; must be even for the rotary pairs.")
    steps = right.number_input("Steps", 1, 50_000, default.train.steps, help="Most optimisation steps (Adam).")
    learning_rate = right.number_input("Learning rate", 1e-6, 1.0, default.train.learning_rate, format="%.4f",
                                       help="Adam's step size.")
    seed = right.number_input("Seed", 0, 2**31 - 1, default.train.seed, help="Every random stream derives from it.")
    submitted = st.form_submit_button("Train", type="primary", help="Start training, or open the stored run.")

if submitted:
    try:
        config = with_changes(default, encoding=encoding, attention=attention, offset=int(offset),
                              train_length=int(train_length), length_mode=length_mode, vocab_size=int(vocab_size),
                              d_model=int(d_model), steps=int(steps), learning_rate=float(learning_rate), seed=int(seed))
    except ConfigError as error:
        st.error(f"Cannot train this configuration: {error}")
        config = None
    if config is not None and RunStore().exists(config.run_id()):
        select_run(config.run_id())
        st.session_state[MESSAGE_KEY] = f"This config and seed were already trained: opened the stored run `{config.run_id()}`."
    elif config is not None and JOB_KEY not in st.session_state:
        st.session_state[JOB_KEY] = TrainingJob(config, RunStore()).start()
    elif config is not None:
        st.warning("A training is already running: stop it first.")

if MESSAGE_KEY in st.session_state:
    st.success(st.session_state.pop(MESSAGE_KEY))


@st.fragment(run_every=0.5)
def live_training() -> None:
    job = st.session_state.get(JOB_KEY)
    if job is None:
        return
    snap = job.snapshot()
    if snap.done:
        del st.session_state[JOB_KEY]
        if snap.error:
            st.error(f"Training failed: {snap.error}")
            return
        select_run(snap.run_id)
        verb = "Stopped" if snap.stopped else "Finished"
        st.session_state[MESSAGE_KEY] = f"{verb}: saved and selected run `{snap.run_id}`. Open the other pages to see it."
        st.rerun()
    total = job.config.train.steps
    if snap.progress is None:
        st.progress(0.0, text="Starting…")
    else:
        p = snap.progress
        left = (total - p.step) / max(p.steps_per_second, 1e-9)
        st.progress(p.step / total, text=f"step {p.step}/{total} · {p.steps_per_second:.0f} steps/s · "
                                         f"at most {left:.0f} s left · loss {p.loss:.3f} · accuracy {p.accuracy:.2f}")
    st.button("Stop", on_click=job.stop, help="Stop now; the run so far is saved with steps set to the steps done.")
    st.plotly_chart(charts.training_curve(pd.DataFrame(snap.history), total), width="stretch", key="live-curve")
    st.caption("**What to look for:** the loss falls and the batch accuracy climbs to 1; RoPE and learned "
               "positions both fit the training length, the difference shows only at longer lengths.")


live_training()

if JOB_KEY not in st.session_state and (run := selected_run()) is not None:
    st.subheader(f"Training of the selected run `{run.run_id}`")
    history = pd.DataFrame(run.history)
    chart(charts.training_curve(history, run.config.train.steps),
          f"{run.steps} steps in {run.train_seconds:.1f} s on {run.device}"
          f"{', stopped early at 100% batch accuracy' if run.stopped_early else ''}; "
          "fitting the training length says nothing yet about longer lengths: see Attention and Dilution.",
          history, "training-history")

"""Train: choose a config, queue it on the shared pool, watch it live (pause, step, resume), stop it, open the run."""

import streamlit as st

from ui.address import stop
from ui.glossary import lead
from ui.state import linked_config
from ui.training.form import form_base, request, show_message, train_form
from ui.training.live import TICKET_KEY, live_training, stored_training
from ui.training.pool import training_device_name, usable_pool
from ui.widgets import selected_run

base = form_base()
st.title("Train a run")
lead("train")
if (pool := usable_pool()) is None:  # its cluster (LENGEN_RAY_ADDRESS) is out of reach: the page said so
    stop()
st.caption(f"Device in use: **{training_device_name()}**. The task: answer the token k places before the "
           "last one (C2), shift the whole sequence by k, or recall a token a delay back at a fixed length (delay-copy, "
           "selective-copy: the Delays page). Training stops early once the batch accuracy "
           f"holds at 100%. {'The training cluster' if getattr(pool, 'shared', False) else 'This server'} trains at most "
           f"{pool.max_concurrent} runs at once; the rest wait in line.")

if base.train.continues:  # a link from Dilution's "Train longer"
    st.info(f"This run continues `{base.train.continues}`: it starts from that run's trained weights and trains "
            f"{base.train.steps:,} more steps, past 100% training accuracy. Keep its task and model as they are.",
            icon=":material/fitness_center:")
if (choice := train_form(base)) is not None and choice.submitted:
    request(pool, choice.config, choice.pace)
show_message()
live_training(pool)

if TICKET_KEY not in st.session_state and linked_config() is None and (run := selected_run()) is not None:
    stored_training(run)

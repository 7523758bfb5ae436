"""Train: choose a config, queue it on the shared pool, watch it live (pause, step, resume), stop it, open the run;
the words around the form are ui.views.train's."""

import streamlit as st

from ui.address import stop
from ui.glossary import lead
from ui.training.form import form_base, request, show_message, train_form
from ui.training.live import live_training
from ui.training.pool import usable_pool
from ui.views import train

base = form_base()
st.title("Train a run")
lead("train")
if (pool := usable_pool()) is None:  # its cluster (LENGEN_RAY_ADDRESS) is out of reach: the page said so
    stop()
train.about(pool)
train.continuation_note(base)  # a link from Dilution's "Train longer"
if (choice := train_form(base)) is not None and choice.submitted:
    request(pool, choice.config, choice.pace)
show_message()
live_training(pool)
train.selected_training()

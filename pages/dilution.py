"""Dilution: accuracy and target mass against length, the prediction from the weights, the fitted law (C1, C6, C7);
the drawing is ui.views.dilution's, every number from the run's one measurement."""

import streamlit as st

from ui.glossary import lead
from ui.reach import show_horizon
from ui.views import dilution
from ui.views.preamble import page_run

st.title("Accuracy against length: the dilution law")
lead("dilution")
run = page_run(single_head=True)
longest, samples = dilution.controls()
lengths, short_of_longest = dilution.measured_lengths(run, longest)
data = dilution.measured(run, lengths, samples)
dilution.key_numbers(run, data, samples, short_of_longest)
show_horizon(run, data.measurement)  # the horizon, measured and predicted: once, from the measurement
dilution.curves(run, data, lengths, samples)
dilution.rules(run, lengths, samples)

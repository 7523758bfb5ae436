"""Sweeps: a grid of runs over encodings, offsets and seeds (or delay sets), one table, and the data collapse
(C6); the drawing is ui.sweep_view's."""

import streamlit as st

from ui import sweep_panels as sweeps
from ui import sweep_view
from ui.glossary import lead

st.title("Sweeps: many runs, one law")
lead("sweeps")

runner = sweeps.sweep_runner()
task = sweep_view.task_choice()
sweep_view.grid_form(runner, task)
sweep_view.live(runner)
sweep_view.sweep_view(sweep_view.shown_sweep(runner, task))

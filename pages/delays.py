"""Delays: distance generalisation at a fixed length. A delay-task run's accuracy against the delay, the
trained delays shaded apart from the unseen ones, and its attention on the source (C10); the drawing is
ui.views.delays'."""

import streamlit as st

from ui.glossary import lead
from ui.views import delays

st.title("Unseen distances at a fixed length")
lead("delays")
delays.introduction()
run = delays.delay_run()
delays.delay_curve(run)
delays.diversity()
delays.transfer(run)

"""Start: what the lab shows in plain words and a newcomer's first step (the first lesson), then the picture, the
presets that open at once, and the claims and where each is seen; the drawing is ui.views.start's."""

import streamlit as st

from ui.first_step import first_step
from ui.glossary import lead
from ui.views import start

st.title("lengen: trained short, tested long")
lead("start")
first_step()  # a newcomer's way in: the first lesson, before any jargon
picture = st.container()  # drawn at the end, so the presets and claims below can be clicked while it computes
start.what_it_shows()
start.presets()
start.claims()
start.picture(picture)

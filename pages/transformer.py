"""Transformer: per-head carriers, one head in detail, accuracy by position and length (C8); the drawing is
ui.views.transformer's and its sections ui.transformer's."""

import streamlit as st

from ui.glossary import lead
from ui.transformer.absolute import section as absolute_section
from ui.transformer.story import section as story_section
from ui.views import transformer
from ui.widgets import transformer_preset_buttons

st.title("From one head to a transformer")
lead("transformer")
transformer.introduction()
run = transformer.transformer_run()
reports = transformer.head_reports(run)
transformer.carrier_heads(run, reports)
transformer.one_head(run, reports)
samples = transformer.accuracy(run)
story_section(samples, 1 / run.config.task.vocab_size)
absolute_section(run)  # last: the page above is drawn while its probes run
transformer_preset_buttons()

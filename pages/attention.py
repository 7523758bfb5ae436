"""Attention: heatmaps at multiples of the training length, a zoom, and the argmax-key trace (C4); the drawing is
ui.views.attention's."""

import streamlit as st

from ui.glossary import lead
from ui.rules import maps as rule_maps
from ui.views import attention
from ui.views.preamble import page_run

st.title("Attention beyond the training length")
lead("attention")
run = page_run()
lengths = attention.length_controls(run)
head = attention.head_choice(run)
attention.maps(run, lengths.shown, head)
attention.zoom_and_trace(run, lengths.trace, head)
rule_maps.attention_rule(run, lengths.allowed, head.layer, head.head, head.name)

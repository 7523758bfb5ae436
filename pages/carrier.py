"""Carrier: the positional rule of the head, its spectrum, rank and Toeplitz structure (C3, C5); the drawing is
ui.views.carrier's."""

import streamlit as st

from ui.glossary import lead
from ui.rules import maps as rule_maps
from ui.views import carrier
from ui.views.preamble import page_run

st.title("The carrier kernel")
lead("carrier")
run = page_run(single_head=True)
search = carrier.search_control(run)
result = carrier.measured(run, search)
carrier.key_numbers(run, result)
carrier.curves(run, result)
carrier.recurrences(run, result, search)
rule_maps.carrier_rules(run, search)

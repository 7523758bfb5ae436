"""Theory, in tabs of which only the chosen one is drawn (ui.theory.sections): the derivations of the carrier and the
dilution law, a live equivariance check (C3), the optimisation experiment (C1: a learned table built to hold the rule,
the gradient its rows get, training from it), the RASP-L view (C9), the glossary every page links its terms to, and the
lab's science document (docs/science.md); the sections' text is ui.views.theory's."""

import streamlit as st

from ui.glossary import lead
from ui.theory.sections import section_tabs
from ui.views import theory

st.title("Theory: why a relative rule carries over")
lead("theory")
name, tab = section_tabs()  # the chosen tab's name, and the tab to draw it in
theory.section(name, tab)

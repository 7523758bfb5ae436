"""Compare: several runs overlaid on the dilution and carrier charts, one colour per run (C1, C6, C7); the
drawing is ui.compare_view's."""

import streamlit as st

from lengen_core.config import ConfigError
from ui import compare_view
from ui.address import stop
from ui.analyses import comparisons
from ui.glossary import lead
from ui.runs import load_run
from ui.widgets import refusal

st.title("Compare runs")
lead("compare")

chosen, names, longest, samples = compare_view.chosen_runs()
if not chosen:
    st.info("Pick at least one run above.")
    stop()
labels = {run_id: names[run_id].removeprefix("Preset: ") for run_id in chosen}
try:
    results = comparisons(chosen, longest, samples)
except ConfigError as error:  # a run over this server's budget at these lengths and samples (lengen.budget)
    refusal("Cannot compare these runs here", error)
    stop()
runs = {run_id: load_run(run_id) for run_id in chosen}
compare_view.overlays(labels, results, runs, samples)
compare_view.key_numbers(labels, results, runs)
compare_view.rules(labels, results, runs, samples)

"""Dilution: accuracy and target mass against length, the prediction from the weights, the fitted law (C1, C6, C7)."""

import numpy as np
import pandas as pd
import streamlit as st

from lengen_core.fit import fit_dilution
from ui import charts
from ui.runs import allowed_lengths, carrier, evaluation, prediction
from ui.state import show_view, view_number
from ui.widgets import chart, require_single_head, run_summary, selected_run

st.title("Accuracy against length: the dilution law")
run = selected_run()
if run is None:
    st.stop()
run_summary(run)
require_single_head(run)
task = run.config.task

LONGEST, SAMPLES = [1 << p for p in range(6, 21)], [64, 128, 256, 512, 1024]
left, right = st.columns([2, 1])
with left:
    view_number("dilution-longest", "longest", LONGEST[0], LONGEST[-1], 1 << 16, LONGEST)
with right:
    view_number("dilution-samples", "samples", SAMPLES[0], SAMPLES[-1], 256, SAMPLES)
longest = left.select_slider(
    "Longest test length", LONGEST, key="dilution-longest",
    format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
    help="Lengths double from the training length up to this one. 2^20 takes about 15 s on a CPU.",
)
samples = right.select_slider("Samples per length", SAMPLES, key="dilution-samples",
                              help="Random sequences per length: more samples narrow the Wilson band.")
show_view("longest", str(longest))
show_view("samples", str(samples))
lengths = allowed_lengths(run.run_id, sorted({task.offset + 1, *(task.train_length << p for p in range(21))} - {0}))
lengths = tuple(n for n in lengths if n <= longest)

reports = evaluation(run.run_id, lengths, samples)
predictions = prediction(run.run_id, lengths)
table = pd.DataFrame({
    "length": lengths, "accuracy": [r.accuracy for r in reports], "accuracy_low": [r.accuracy_low for r in reports],
    "accuracy_high": [r.accuracy_high for r in reports], "target_mass": [r.target_mass for r in reports],
    "predicted_accuracy": [p.accuracy for p in predictions], "predicted_mass": [p.target_mass for p in predictions],
})
fit = fit_dilution(table["length"], table["target_mass"], task.train_length, task.vocab_size)
fit_table = None
if fit is not None:
    grid = np.unique(np.geomspace(task.train_length, max(lengths), 64).astype(int))
    fit_table = pd.DataFrame({"length": grid, "fitted_mass": fit.target_mass(grid), "fitted_accuracy": fit.accuracy(grid)})
failures = []
if run.config.model.encoding == "rope":
    first = [r.offset + 1 for r in carrier(run.run_id, max(lengths)).near_recurrences[:5]]
    failures = sorted(set(first))

a, b, c = st.columns(3)
a.metric("Accuracy at the longest length", f"{table['accuracy'].iloc[-1]:.2f}", help="Measured at the query.")
b.metric("m_out (fitted)", "—" if fit is None else f"{fit.m_out:.2f}",
         help="Effective margin of the target over far keys, from the slope e^(−m_out) of 1/p against length.")
c.metric("R² of the fitted law", "—" if fit is None else f"{fit.r_squared:.3f}",
         help="How well 1/p(L) = 1/p(L_train) + (L − L_train)·e^(−m_out) fits the measured points.")

chart(charts.dilution(table, fit_table, 1 / task.vocab_size, failures),
      "RoPE stays near 1 for several × the training length, then decays smoothly toward chance; learned "
      "positions and linear attention drop to chance just past the training length. The dashed prediction uses "
      "only the weights; red dotted lines are lengths where a near-recurrence enters the window.",
      table, "dilution")
chart(charts.inverse_mass(table, fit_table),
      "beyond the training length 1/p grows linearly with L (slope 1 on these log–log axes): the dilution law.",
      table[["length", "target_mass", "predicted_mass"]].assign(inverse_mass=1 / table["target_mass"]), "inverse-mass")
if fit_table is not None:
    st.download_button("Download the fitted law (CSV)", fit_table.to_csv(index=False).encode(), "fitted-law.csv",
                       "text/csv", help="The fitted law on a grid of lengths.")

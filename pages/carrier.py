"""Carrier: the positional rule of the head, its spectrum, rank and Toeplitz structure (C3, C5)."""

import pandas as pd
import streamlit as st

from ui import charts
from ui.runs import carrier
from ui.state import show_view, view_number
from ui.widgets import chart, require_single_head, run_summary, selected_run

st.title("The carrier kernel")
run = selected_run()
if run is None:
    st.stop()
run_summary(run)
require_single_head(run)

SEARCH = [1 << p for p in range(10, 21)]
view_number("carrier-search", "search", SEARCH[0], SEARCH[-1], 1 << 16, SEARCH)
search = st.select_slider(
    "Search near-recurrences up to offset", SEARCH, key="carrier-search",
    format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
    help="Far offsets where a token pair's logit comes back near the target's; longer searches take longer.",
)
show_view("search", str(search))
result = carrier(run.run_id, search)

a, b, c, d = st.columns(4)
a.metric("Toeplitz fraction", f"{result.toeplitz_fraction:.3f}",
         help="Energy of the mean logit matrix kept when each diagonal is replaced by its mean: 1 means offset-only (C3).")
b.metric("Argmax offset", result.argmax_offset, help="Where s(Δ) peaks inside the training range.")
c.metric("Alignment", "yes" if result.alignment else "no", help=f"Does the peak sit at the target offset k = {result.offset}?")
d.metric("Effective rank", result.effective_rank, help="Singular values keeping 99% of the energy of S_tu = s(t − u) (C5).")
st.caption(f"Carrier source: **{result.source}** ({'read from the weights, no forward pass' if result.source == 'analytic' else 'mean recorded logit at each offset'}); "
           f"margin s(k) − next best in range = {result.margin:.2f} nats; active frequencies: {result.active_frequencies}.")

chart(charts.carrier_curve(result.offsets, result.values, result.train_length, result.offset),
      "the peak inside the shaded training range sits on the red line at k; for RoPE the curve continues "
      "smoothly past the training range, for a learned table it does not exist there.",
      pd.DataFrame({"offset": result.offsets, "s": result.values}), "carrier")

left, right = st.columns(2)
with left:
    chart(charts.spectrum(result.frequencies, result.amplitudes, result.source == "analytic"),
          "a few frequencies carry the amplitude: the carrier is a short sum of cosines.",
          pd.DataFrame({"frequency": result.frequencies, "amplitude": result.amplitudes}), "spectrum")
with right:
    chart(charts.singular_values(result.singular_values, result.effective_rank),
          "a sharp drop after a few values: the positional rule is low rank (C5).",
          pd.DataFrame({"index": range(1, len(result.singular_values) + 1), "singular_value": result.singular_values}),
          "singular-values")

recurrences = pd.DataFrame([vars(r) for r in result.near_recurrences],
                           columns=["offset", "query_token", "key_token", "gap"])
if recurrences.empty:
    st.info("No near-recurrences found in the searched range (none are computed for measured carriers).")
else:
    chart(charts.recurrences(recurrences["offset"].tolist(), recurrences["gap"].tolist(), result.train_length),
          "each cross is a far offset where some token pair's logit comes back within ln 4 of the target's "
          "(a negative gap: above it): once a sequence is "
          "longer than the first of them, accuracy is predicted to fall (see Dilution).",
          recurrences, "near-recurrences")

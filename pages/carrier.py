"""Carrier: the positional rule of the head, its spectrum, rank and Toeplitz structure (C3, C5)."""

import pandas as pd
import streamlit as st

from lengen_core.analysis.carrier import ALIGNMENT_MARGIN
from lengen_core.claims import expectation
from lengen_core.config import ConfigError
from ui.address import stop
from ui.analyses import CARRIER_SEARCH
from ui.captions import readouts, show
from ui.charts import common as charts
from ui.glossary import lead
from lengen.presets import CARRIER_SEARCHES
from ui.rules import maps as rule_maps
from ui.runs import carrier
from ui.state import show_view, view_number
from ui.widgets import chart, refusal, require_single_head, run_summary, selected_run

st.title("The carrier kernel")
lead("carrier")
run = selected_run()
if run is None:
    stop()
run_summary(run)
require_single_head(run)

SEARCH = list(CARRIER_SEARCHES)
analytic = getattr(run.model.encoding, "rotary", False)  # near-recurrences are searched for analytic carriers only
if analytic:
    view_number("carrier-search", "search", SEARCH[0], SEARCH[-1], CARRIER_SEARCH, SEARCH)
    search = st.select_slider(
        "Search near-recurrences up to offset", SEARCH, key="carrier-search",
        format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
        help="Far offsets where a token pair's logit comes back near the target's; longer searches take longer.",
    )
else:  # a measured carrier has no near-recurrence search: no slider that would do nothing
    search = SEARCH[0]
show_view("search", str(search) if analytic else None)
try:
    result = carrier(run.run_id, search)
except ConfigError as error:  # over this server's budget (lengen.budget)
    refusal("No carrier here", error)
    stop()
trained, untrained = result.metrics, result.baseline

spread = result.baseline_range
st.markdown(readouts.baseline_note(spread))
a, b, c, d = st.columns(4)
a.metric("Alignment", "yes" if trained.aligned else "no", delta=f"untrained: {'yes' if untrained.aligned else 'no'}",
         delta_color="off", delta_arrow="off", help=f"The peak of s(Δ) in the training range is at k = {result.offset} and beats every "
                                 f"other offset there by at least {ALIGNMENT_MARGIN:g} nat.")
b.metric("Margin at k (nats)", f"{trained.margin:+.2f}",
         delta=f"untrained: {readouts.untrained_text(untrained.margin, spread and spread.margin, '+.2f')}",
         delta_color="off", delta_arrow="off", help="s(k) minus the largest s(Δ) at any other offset of the training range.")
c.metric("Effective rank", trained.effective_rank,
         delta=f"untrained: {readouts.untrained_text(untrained.effective_rank, spread and spread.effective_rank, 'd')}",
         delta_color="off", delta_arrow="off", help="Singular values keeping 99% of the energy of the centred positional matrix (C5).")
d.metric("Toeplitz fraction", f"{trained.toeplitz_fraction:.3f}",
         delta=f"untrained: {readouts.untrained_text(untrained.toeplitz_fraction, spread and spread.toeplitz_fraction, '.3f')}",
         delta_color="off", delta_arrow="off", help="Energy of the centred expected logit matrix kept when each diagonal is replaced by "
                                 "its mean. It measures equivariance (C3), not a learned rule: a RoPE, NoPE or ALiBi "
                                 "head is exactly 1 for any weights, trained or not.")
st.caption(readouts.toeplitz_reading(trained.toeplitz_fraction, spread,
                                     expectation(run.config.model.encoding, run.config.model.attention).relative))
st.caption(f"Carrier source: **{result.source}** ({'read from the weights, no forward pass' if result.source == 'analytic' else 'expected logit at each offset, computed from the weights'}); "
           f"argmax offset {trained.argmax_offset} (untrained {untrained.argmax_offset}); active frequencies "
           f"{trained.active_frequencies} (untrained {untrained.active_frequencies}).")

trained_positions = getattr(run.model.encoding, "trained_positions", False)
encoding, attention = run.config.model.encoding, run.config.model.attention
learned = None if run.verdict is None else run.verdict.learned
bears_c5 = readouts.carrier_verdict(encoding, attention, trained.aligned, learned)[2]  # the one C5 verdict, read twice
show.chart_captioned(charts.carrier_curve(result.offsets, result.values, result.train_length, result.offset),
                     readouts.carrier_caption(trained, untrained, result.offset, trained_positions, run.verdict,
                                              encoding, attention),
                     pd.DataFrame({"offset": result.offsets, "s": result.values}), "carrier", run.run_id)

left, right = st.columns(2)
with left:
    chart(charts.spectrum(result.frequencies, result.amplitudes, result.source == "analytic"),
          readouts.spectrum_caption(result.amplitudes, trained.active_frequencies, untrained.active_frequencies),
          pd.DataFrame({"frequency": result.frequencies, "amplitude": result.amplitudes}), "spectrum", run.run_id)
with right:
    show.chart_captioned(
        charts.singular_values(result.singular_values, trained.effective_rank),
        readouts.rank_caption(trained.effective_rank, untrained.effective_rank, len(result.singular_values),
                              spread and spread.effective_rank, bears_c5),
        pd.DataFrame({"index": range(1, len(result.singular_values) + 1), "singular_value": result.singular_values}),
        "singular-values", run.run_id)

recurrences = pd.DataFrame([vars(r) for r in result.near_recurrences],
                           columns=["offset", "query_token", "key_token", "gap"])
if not analytic:
    st.caption("Near-recurrences are searched for analytic (RoPE) carriers only: this carrier is measured.")
elif recurrences.empty:
    st.info(f"No near-recurrences found up to offset {search:,}.")
else:
    show.chart_captioned(charts.recurrences(recurrences["offset"].tolist(), recurrences["gap"].tolist(),
                                            result.train_length),
                         readouts.recurrence_caption(recurrences["offset"].tolist()), recurrences, "near-recurrences",
                         run.run_id)
rule_maps.carrier_rules(run, search)

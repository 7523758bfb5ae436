"""The Carrier page: the single head's positional rule s(Δ), its readouts against the untrained baseline, its
spectrum, rank and near-recurrences (C3, C5)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lengen.presets import CARRIER_SEARCHES
from lengen_core.analysis.carrier import ALIGNMENT_MARGIN, Carrier
from lengen_core.claims import expectation
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui import widgets
from ui.address import stop
from ui.analyses import CARRIER_SEARCH
from ui.captions import readouts, show
from ui.charts import common as charts
from ui.runs import carrier
from ui.state import show_view, view_number

SEARCH = list(CARRIER_SEARCHES)


def analytic(run: Run) -> bool:
    """Near-recurrences are searched for analytic (RoPE) carriers only."""
    return getattr(run.model.encoding, "rotary", False)


def search_control(run: Run) -> int:
    """How far near-recurrences are searched: a slider for an analytic carrier, none for a measured one."""
    if analytic(run):
        view_number("carrier-search", "search", SEARCH[0], SEARCH[-1], CARRIER_SEARCH, SEARCH)
        search = st.select_slider(
            "Search near-recurrences up to offset", SEARCH, key="carrier-search",
            format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
            help="Far offsets where a token pair's logit comes back near the target's; longer searches take longer.",
        )
    else:  # a measured carrier has no near-recurrence search: no slider that would do nothing
        search = SEARCH[0]
    show_view("search", str(search) if analytic(run) else None)
    return search


def measured(run: Run, search: int) -> Carrier:
    """The run's carrier, or the page stops with the reason it is not computed here."""
    try:
        return carrier(run.run_id, search)
    except ConfigError as error:  # over this server's budget (lengen.budget)
        widgets.refusal("No carrier here", error)
        stop()


def key_numbers(run: Run, result: Carrier) -> None:
    """Alignment, margin, rank and Toeplitz fraction, each beside the untrained model's, and what they read."""
    trained, untrained, spread = result.metrics, result.baseline, result.baseline_range
    st.markdown(readouts.baseline_note(spread))
    a, b, c, d = st.columns(4)
    a.metric("Alignment", "yes" if trained.aligned else "no", delta=f"untrained: {'yes' if untrained.aligned else 'no'}",
             delta_color="off", delta_arrow="off",
             help=f"The peak of s(Δ) in the training range is at k = {result.offset} and beats every other offset "
                  f"there by at least {ALIGNMENT_MARGIN:g} nat.")
    b.metric("Margin at k (nats)", f"{trained.margin:+.2f}",
             delta=f"untrained: {readouts.untrained_text(untrained.margin, spread and spread.margin, '+.2f')}",
             delta_color="off", delta_arrow="off",
             help="s(k) minus the largest s(Δ) at any other offset of the training range.")
    c.metric("Effective rank", trained.effective_rank,
             delta=f"untrained: {readouts.untrained_text(untrained.effective_rank, spread and spread.effective_rank, 'd')}",
             delta_color="off", delta_arrow="off",
             help="Singular values keeping 99% of the energy of the centred positional matrix (C5).")
    d.metric("Toeplitz fraction", f"{trained.toeplitz_fraction:.3f}",
             delta="untrained: "
                   f"{readouts.untrained_text(untrained.toeplitz_fraction, spread and spread.toeplitz_fraction, '.3f')}",
             delta_color="off", delta_arrow="off",
             help="Energy of the centred expected logit matrix kept when each diagonal is replaced by its mean. It "
                  "measures equivariance (C3), not a learned rule: a RoPE, NoPE or ALiBi head is exactly 1 for any "
                  "weights, trained or not.")
    st.caption(readouts.toeplitz_reading(trained.toeplitz_fraction, spread,
                                         expectation(run.config.model.encoding, run.config.model.attention).relative))
    how = ("read from the weights, no forward pass" if result.source == "analytic" else
           "expected logit at each offset, computed from the weights")
    st.caption(f"Carrier source: **{result.source}** ({how}); argmax offset {trained.argmax_offset} (untrained "
               f"{untrained.argmax_offset}); active frequencies {trained.active_frequencies} (untrained "
               f"{untrained.active_frequencies}).")


def curves(run: Run, result: Carrier) -> None:
    """The carrier s(Δ), then its spectrum beside its singular values."""
    trained, untrained, spread = result.metrics, result.baseline, result.baseline_range
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
        widgets.chart(charts.spectrum(result.frequencies, result.amplitudes, result.source == "analytic"),
                      readouts.spectrum_caption(result.amplitudes, trained.active_frequencies,
                                                untrained.active_frequencies),
                      pd.DataFrame({"frequency": result.frequencies, "amplitude": result.amplitudes}), "spectrum",
                      run.run_id)
    with right:
        show.chart_captioned(
            charts.singular_values(result.singular_values, trained.effective_rank),
            readouts.rank_caption(trained.effective_rank, untrained.effective_rank, len(result.singular_values),
                                  spread and spread.effective_rank, bears_c5),
            pd.DataFrame({"index": range(1, len(result.singular_values) + 1), "singular_value": result.singular_values}),
            "singular-values", run.run_id)


def recurrences(run: Run, result: Carrier, search: int) -> None:
    """The near-recurrences found up to `search`, or why there are none."""
    found = pd.DataFrame([vars(r) for r in result.near_recurrences], columns=["offset", "query_token", "key_token", "gap"])
    if not analytic(run):
        st.caption("Near-recurrences are searched for analytic (RoPE) carriers only: this carrier is measured.")
    elif found.empty:
        st.info(f"No near-recurrences found up to offset {search:,}.")
    else:
        show.chart_captioned(charts.recurrences(found["offset"].tolist(), found["gap"].tolist(), result.train_length),
                             readouts.recurrence_caption(found["offset"].tolist()), found, "near-recurrences",
                             run.run_id)

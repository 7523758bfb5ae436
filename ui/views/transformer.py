"""The Transformer page's reading of a multi-head run (C8): which heads carry the offset, one head in detail, and
accuracy by position and by length; its later sections are ui.transformer's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lengen.presets import POSITION_MULTIPLES, TRANSFORMER_MULTIPLES
from lengen_core.analysis.heads import CARRIER_WEIGHT, HeadReport
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui import widgets
from ui.address import stop
from ui.analyses import head_attention, heads, length_multiples, sequence_evaluation
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import mechanism as mechanism_captions
from ui.captions import show
from ui.captions.common import Caption
from ui.charts import common as charts
from ui.charts import transformer as transformer_charts
from ui.state import show_view, view_number
from ui.transformer.absolute import minimal_section

MULTIPLES = TRANSFORMER_MULTIPLES  # test lengths, × the training length (lengen.presets)
SAMPLES = [16, 32, 64, 128, 256]


def introduction() -> None:
    """The run this page is about, and its question."""
    st.markdown("A 2-layer, 2-head transformer trained on the **shift** task (every position t ≥ k answers the token "
                "k places back). Does one of its heads learn the same carrier as the single head, and does it carry "
                "over to longer inputs?")


def transformer_run() -> Run:
    """The selected run, summarised; or the page stops: with the presets when no run is selected, with a pointer to
    Delays for a delay task's run, and with the presets and where absolute position comes from (the minimal
    section) for the minimal single head."""
    run = widgets.selected_run()
    if run is None:
        widgets.transformer_preset_buttons()
        stop()
    widgets.require_length_task(run)
    if run.config.single_head:
        st.info("The selected run is the minimal single head on the retrieval task: its pages are Attention, Carrier "
                "and Dilution. This page reads runs that answer at every position: open a transformer preset, or "
                "train one with Layers ≥ 1 (or the shift task) on the Train page.")
        widgets.transformer_preset_buttons()
        minimal_section(run)
        stop()
    widgets.run_summary(run)
    return run


def head_reports(run: Run) -> list[HeadReport]:
    """Every head's carrier readouts, or the page stops with why they are not computed here."""
    try:
        return heads(run.run_id)
    except ConfigError as error:  # over this server's budget (lengen.budget), say
        widgets.refusal("Not computed for this run", error)
        stop()


def _learned(run: Run) -> bool | None:
    return None if run.verdict is None else run.verdict.learned


def carrier_heads(run: Run, reports: list[HeadReport]) -> None:
    """How many heads carry the offset and how many pin, and every head's carrier in a grid."""
    model, k = run.config.model, run.config.task.offset
    carriers = transformer_charts.carrier_table(reports)
    carrier_names = [f"L{h.layer}H{h.head}" for h in reports if h.is_carrier]
    pinned_names = [f"L{h.layer}H{h.head}" for h in reports if h.pinned_key is not None]
    a, b, c = st.columns(3)
    a.metric("Carrier heads", f"{len(carrier_names)} of {len(reports)}",
             help=f"Heads whose carrier peaks at k = {k} with mean weight ≥ {CARRIER_WEIGHT:g} on the target key.")
    b.metric("Pinned heads", f"{len(pinned_names)} of {len(reports)}",
             help="Heads whose queries beyond the training length mostly attend to one key inside it (C4).")
    c.metric("Best Toeplitz fraction", f"{max(h.toeplitz_fraction for h in reports):.3f}",
             help="1 means the head's mean logit depends on t − u alone.")
    st.caption(f"Carrier heads: {', '.join(carrier_names) or 'none'} · pinned heads: {', '.join(pinned_names) or 'none'} "
               "(L = layer, H = head, from 0).")
    show.chart_captioned(transformer_charts.head_grid(carriers, model.n_layers, model.n_heads, k),
                         mechanism_captions.head_grid_caption(reports, model.encoding, model.attention, _learned(run)),
                         carriers, "head-carriers", run.run_id)


def one_head(run: Run, reports: list[HeadReport]) -> None:
    """Every head's readouts in a table; the head picked (the best carrier first): its carrier, and its attention at
    multiples of the training length."""
    L_train, k, learned = run.config.task.train_length, run.config.task.offset, _learned(run)
    st.subheader("One head in detail")
    table = pd.DataFrame([{key: getattr(h, key) for key in ("layer", "head", "argmax_offset", "toeplitz_fraction",
                                                           "effective_rank", "target_weight", "is_carrier",
                                                           "pinned_key", "pinned_share")} for h in reports])
    names = [f"L{h.layer} H{h.head}" for h in reports]
    best = max(range(len(reports)), key=lambda i: (reports[i].is_carrier, reports[i].target_weight))  # picked first
    picked = widgets.head_picker([f"L{h.layer}H{h.head}" for h in reports], best, run.run_id, "transformer-head")
    head = reports[picked]
    st.dataframe(table, hide_index=True, column_config={
        "toeplitz_fraction": st.column_config.NumberColumn(format="%.3f"),
        "target_weight": st.column_config.NumberColumn(format="%.3f"),
        "pinned_share": st.column_config.NumberColumn(format="%.2f")})
    said = mechanism_captions.heads_table_caption(reports, k)
    show.caption(Caption(f"**What to look for:** {said.lead}", said.more))
    columns = st.columns(3)
    with columns[0]:
        show.chart_captioned(charts.carrier_curve(np.arange(len(head.carrier)), head.carrier, L_train, k),
                             mechanism_captions.head_carrier_caption(names[picked], head, k, learned),  # the grid's verdict
                             pd.DataFrame({"offset": range(len(head.carrier)), "s": head.carrier}), "head-carrier",
                             run.run_id)
    for column, length in zip(columns[1:], length_multiples(run.run_id, POSITION_MULTIPLES), strict=False):
        try:
            weights = head_attention(run.run_id, length, head.layer, head.head)
        except ConfigError as error:
            with column:
                widgets.refusal("Not computed for this run", error)
            continue
        said = attention_captions.trace_caption(attention_captions.weights_trace(weights, L_train, k), None, learned,
                                                last_query_only=False)
        with column:
            show.chart_captioned(
                transformer_charts.head_attention(weights, length, L_train, f"{names[picked]} at L = {length}"),
                Caption(f"{names[picked]}: {said.lead}", f"{said.more} Mean |weight| over 16 sequences."),
                pd.DataFrame(weights).rename_axis("query").reset_index(), f"head-attention-{length}", run.run_id)


def accuracy(run: Run) -> int:
    """Accuracy by position at the longest length beside accuracy by length, from the samples chosen here (returned,
    for the sections below)."""
    L_train, model, chance = run.config.task.train_length, run.config.model, 1 / run.config.task.vocab_size
    st.subheader("Accuracy by position and by length")
    view_number("transformer-samples", "samples", SAMPLES[0], SAMPLES[-1], 64, SAMPLES)
    samples = st.select_slider("Samples per length", SAMPLES, key="transformer-samples",
                               help="Random sequences per length; every position of each is scored.")
    show_view("samples", str(samples))
    lengths = length_multiples(run.run_id, MULTIPLES)
    try:
        evaluated = sequence_evaluation(run.run_id, lengths, samples)
    except ConfigError as error:
        widgets.refusal("Not computed for this run", error)
        stop()
    by_length = transformer_charts.length_table(evaluated, L_train)  # with 95% Wilson intervals and sample counts
    by_position = transformer_charts.position_table(evaluated)
    past = transformer_charts.beyond_table("Positions past training", evaluated, L_train)
    curve = accuracy_captions.run_curve("Positions past training", run.config, run.verdict, past["length"],
                                        past["accuracy"], past["accuracy_low"])
    holds = accuracy_captions.past_verdict(curve)  # does it hold past training: one answer, read by both captions
    left, right = st.columns(2)
    with left:
        longest = evaluated[-1]
        widgets.chart(transformer_charts.accuracy_by_position(by_position, L_train, chance),
                      accuracy_captions.position_caption(longest.positions, longest.accuracy_by_position,
                                                         longest.length, L_train, chance, samples, model.encoding,
                                                         model.attention, _learned(run), holds),
                      by_position, "accuracy-by-position", run.run_id)
    with right:
        said = accuracy_captions.curve_caption(curve, multiples=(2, 4, 16))
        show.chart_captioned(transformer_charts.accuracy_by_length(by_length, chance),
                             Caption(said.lead, f"The dashed curve scores only the positions past training. {said.more}"),
                             by_length, "accuracy-by-length", run.run_id)
    return samples

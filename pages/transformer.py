"""Transformer: per-head carriers, one head in detail, accuracy by position and length (C8)."""

import numpy as np
import pandas as pd
import streamlit as st

from lengen_core.config import ConfigError
from ui.address import stop
from ui.analyses import head_attention, heads, length_multiples, sequence_evaluation
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import mechanism as mechanism_captions
from ui.captions import show
from ui.captions.common import Caption
from ui.charts import common as charts
from ui.charts import transformer as transformer_charts
from ui.glossary import lead
from lengen.presets import POSITION_MULTIPLES, TRANSFORMER_MULTIPLES
from ui.state import show_view, view_number
from ui.transformer.absolute import minimal_section
from ui.transformer.absolute import section as absolute_section
from ui.transformer.story import section as story_section
from ui.widgets import (
    chart,
    head_picker,
    refusal,
    require_length_task,
    run_summary,
    selected_run,
    transformer_preset_buttons,
)

MULTIPLES = TRANSFORMER_MULTIPLES  # test lengths, × the training length (lengen.presets)
SAMPLES = [16, 32, 64, 128, 256]

st.title("From one head to a transformer")
lead("transformer")
st.markdown("A 2-layer, 2-head transformer trained on the **shift** task (every position t ≥ k answers the token "
            "k places back). Does one of its heads learn the same carrier as the single head, and does it carry "
            "over to longer inputs?")


run = selected_run()
if run is None:
    transformer_preset_buttons()
    stop()
require_length_task(run)
if run.config.single_head:
    st.info("The selected run is the minimal single head on the retrieval task: its pages are Attention, Carrier "
            "and Dilution. This page reads runs that answer at every position: open a transformer preset, or train "
            "one with Layers ≥ 1 (or the shift task) on the Train page.")
    transformer_preset_buttons()
    minimal_section(run)
    stop()
run_summary(run)
task, model = run.config.task, run.config.model
L_train, k, chance = task.train_length, task.offset, 1 / task.vocab_size
learned = None if run.verdict is None else run.verdict.learned

try:
    reports = heads(run.run_id)
except ConfigError as error:  # over this server's budget (lengen.budget), say
    refusal("Not computed for this run", error)
    stop()
carriers = transformer_charts.carrier_table(reports)
carrier_heads = [f"L{h.layer}H{h.head}" for h in reports if h.is_carrier]
pinned_heads = [f"L{h.layer}H{h.head}" for h in reports if h.pinned_key is not None]
a, b, c = st.columns(3)
a.metric("Carrier heads", f"{len(carrier_heads)} of {len(reports)}",
         help=f"Heads whose carrier peaks at k = {k} with mean weight ≥ 0.5 on the target key.")
b.metric("Pinned heads", f"{len(pinned_heads)} of {len(reports)}",
         help="Heads whose queries beyond the training length mostly attend to one key inside it (C4).")
c.metric("Best Toeplitz fraction", f"{max(h.toeplitz_fraction for h in reports):.3f}",
         help="1 means the head's mean logit depends on t − u alone.")
st.caption(f"Carrier heads: {', '.join(carrier_heads) or 'none'} · pinned heads: {', '.join(pinned_heads) or 'none'} "
           "(L = layer, H = head, from 0).")
show.chart_captioned(transformer_charts.head_grid(carriers, model.n_layers, model.n_heads, k),
                     mechanism_captions.head_grid_caption(reports, model.encoding, model.attention, learned), carriers,
                     "head-carriers", run.run_id)

st.subheader("One head in detail")
table = pd.DataFrame([{key: getattr(h, key) for key in ("layer", "head", "argmax_offset", "toeplitz_fraction",
                                                       "effective_rank", "target_weight", "is_carrier", "pinned_key",
                                                       "pinned_share")} for h in reports])
names = [f"L{h.layer} H{h.head}" for h in reports]
best = max(range(len(reports)), key=lambda i: (reports[i].is_carrier, reports[i].target_weight))  # picked first
picked = head_picker([f"L{h.layer}H{h.head}" for h in reports], best, run.run_id, "transformer-head")
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
for column, (multiple, length) in zip(columns[1:], zip(POSITION_MULTIPLES, length_multiples(run.run_id, POSITION_MULTIPLES), strict=False),
                                      strict=False):
    try:
        weights = head_attention(run.run_id, length, head.layer, head.head)
    except ConfigError as error:
        with column:
            refusal("Not computed for this run", error)
        continue
    said = attention_captions.trace_caption(attention_captions.weights_trace(weights, L_train, k), None, learned,
                                            last_query_only=False)
    with column:
        show.chart_captioned(
            transformer_charts.head_attention(weights, length, L_train, f"{names[picked]} at L = {length}"),
            Caption(f"{names[picked]}: {said.lead}", f"{said.more} Mean |weight| over 16 sequences."),
            pd.DataFrame(weights).rename_axis("query").reset_index(), f"head-attention-{length}", run.run_id)

st.subheader("Accuracy by position and by length")
view_number("transformer-samples", "samples", SAMPLES[0], SAMPLES[-1], 64, SAMPLES)
samples = st.select_slider("Samples per length", SAMPLES, key="transformer-samples",
                           help="Random sequences per length; every position of each is scored.")
show_view("samples", str(samples))
lengths = length_multiples(run.run_id, MULTIPLES)
try:
    evaluated = sequence_evaluation(run.run_id, lengths, samples)
except ConfigError as error:
    refusal("Not computed for this run", error)
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
    chart(transformer_charts.accuracy_by_position(by_position, L_train, chance),
          accuracy_captions.position_caption(longest.positions, longest.accuracy_by_position, longest.length, L_train,
                                             chance, samples, model.encoding, model.attention, learned, holds),
          by_position, "accuracy-by-position", run.run_id)
with right:
    said = accuracy_captions.curve_caption(curve, multiples=(2, 4, 16))
    show.chart_captioned(transformer_charts.accuracy_by_length(by_length, chance),
                         Caption(said.lead, f"The dashed curve scores only the positions past training. {said.more}"),
                         by_length, "accuracy-by-length", run.run_id)

story_section(samples, chance)
absolute_section(run)  # last: the page above is drawn while its probes run
transformer_preset_buttons()

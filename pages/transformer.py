"""Transformer: per-head carriers, one head in detail, accuracy by position and length (C8)."""

import numpy as np
import pandas as pd
import streamlit as st

from ui import charts, compare_charts, transformer_charts
from ui.analyses import head_attention, heads, length_multiples, sequence_evaluation
from ui.presets import transformer_presets
from ui.state import select_run
from ui.widgets import chart, run_summary, selected_run

MULTIPLES = (1, 2, 4, 8, 16)  # test lengths, × the training length

st.title("From one head to a transformer")
st.markdown("A 2-layer, 2-head transformer trained on the **shift** task (every position t ≥ k answers the token "
            "k places back). Does one of its heads learn the same carrier as the single head, and does it carry "
            "over to longer inputs?")


def preset_buttons(where) -> None:
    for column, (label, run_id) in zip(where.columns(len(transformer_presets())), transformer_presets().items(),
                                       strict=True):
        if column.button(f"Open {label}", key=f"open-{label}", width="stretch",
                         help="Select this shipped 2-layer, 2-head run (shift task, seed 0)."):
            select_run(run_id)
            st.rerun()


run = selected_run()
if run is None:
    preset_buttons(st)
    st.stop()
if run.config.model.n_layers == 0:
    st.info("The selected run is the minimal single head (0 layers): this page needs a multi-layer run. "
            "Open a transformer preset, or train one with Layers ≥ 1 on the Train page.")
    preset_buttons(st)
    st.stop()
run_summary(run)
task, model = run.config.task, run.config.model
L_train, k, chance = task.train_length, task.offset, 1 / task.vocab_size

reports = heads(run.run_id)
carriers = pd.concat([pd.DataFrame({"layer": h.layer, "head": h.head, "offset": range(len(h.carrier)), "s": h.carrier,
                                    "is_carrier": h.is_carrier, "pinned_key": h.pinned_key}) for h in reports])
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
chart(transformer_charts.head_grid(carriers, model.n_layers, model.n_heads, k),
      f"a red panel is a carrier head: its s(Δ) peaks on the dashed line k = {k}; purple panels are pinned to an "
      "absolute key. With RoPE a later-layer head carries the offset; with a learned table heads pin.",
      carriers, "head-carriers")

st.subheader("One head in detail")
table = pd.DataFrame([{key: getattr(h, key) for key in ("layer", "head", "argmax_offset", "toeplitz_fraction",
                                                       "effective_rank", "target_weight", "is_carrier", "pinned_key",
                                                       "pinned_share")} for h in reports])
names = [f"L{h.layer} H{h.head}" for h in reports]
best = max(range(len(reports)), key=lambda i: (reports[i].is_carrier, reports[i].target_weight))
picked = st.selectbox("Head", range(len(reports)), index=best, format_func=lambda i: names[i],
                      help="Layer and head; the carrier head with the most weight on the target is picked first.")
head = reports[picked]
st.dataframe(table, hide_index=True, column_config={
    "toeplitz_fraction": st.column_config.NumberColumn(format="%.3f"),
    "target_weight": st.column_config.NumberColumn(format="%.3f"),
    "pinned_share": st.column_config.NumberColumn(format="%.2f")})
st.caption("**What to look for:** a carrier head has argmax_offset = k, a Toeplitz fraction near 1 and most of its "
           "weight on the target; a pinned head sends most queries beyond training to pinned_key.")
columns = st.columns(3)
with columns[0]:
    chart(charts.carrier_curve(np.arange(len(head.carrier)), head.carrier, L_train, k),
          f"measured from recorded logits over the training range; a carrier head peaks at k = {k}.",
          pd.DataFrame({"offset": range(len(head.carrier)), "s": head.carrier}), "head-carrier")
looks = {1: f"inside training a carrier head draws a bright line k = {k} left of the diagonal.",
         4: "past the dashed training length the line goes on for a relative rule; a pinned head lights one "
            "column instead. Mean |weight| over 16 sequences."}
for column, (multiple, length) in zip(columns[1:], zip((1, 4), length_multiples(run.run_id, (1, 4)), strict=False),
                                      strict=False):
    weights = head_attention(run.run_id, length, head.layer, head.head)
    with column:
        chart(transformer_charts.head_attention(weights, length, L_train, f"{names[picked]} at L = {length}"),
              looks[multiple], pd.DataFrame(weights).rename_axis("query").reset_index(), f"head-attention-{length}")

st.subheader("Accuracy by position and by length")
samples = st.select_slider("Samples per length", [16, 32, 64, 128, 256], value=64,
                           help="Random sequences per length; every position of each is scored.")
lengths = length_multiples(run.run_id, MULTIPLES)
evaluated = sequence_evaluation(run.run_id, lengths, samples)
by_length = pd.DataFrame([{"length": r.length, "accuracy": r.accuracy, "accuracy_beyond": r.accuracy_beyond,
                           "target_mass": r.target_mass, "carrier_head": f"L{r.carrier_layer}H{r.carrier_head}"}
                          for r in evaluated])
by_position = pd.concat([pd.DataFrame({"length": r.length, "position": r.positions, "accuracy": r.accuracy_by_position})
                         for r in evaluated])
left, right = st.columns(2)
with left:
    chart(transformer_charts.accuracy_by_position(by_position, L_train, chance),
          "RoPE holds accuracy past the dashed training length and fades slowly at far positions; a learned "
          "table drops to chance at the first position it never trained.", by_position, "accuracy-by-position")
with right:
    chart(transformer_charts.accuracy_by_length(by_length, chance),
          "the dashed curve scores only positions beyond training: near 1 at 2–4× for RoPE, at chance for "
          "learned positions.", by_length, "accuracy-by-length")

st.subheader("RoPE against learned positions")
story = pd.concat([
    pd.DataFrame({"run": label, "length": [r.length for r in curve], "accuracy": [r.accuracy_beyond for r in curve]})
    for label, run_id in transformer_presets().items()
    for curve in [sequence_evaluation(run_id, length_multiples(run_id, MULTIPLES), samples)]  # selected run's: cached
]).dropna()  # no positions beyond training at 1×
beyond = compare_charts.accuracy_overlay(story, chance).update_layout(title="Accuracy beyond the training length")
chart(beyond,
      "on positions beyond the training length the RoPE transformer stays far above chance while the learned one "
      "sits on the chance line: C1 holds in the transformer (C8).", story, "transformer-story")
preset_buttons(st)

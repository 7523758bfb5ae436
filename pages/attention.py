"""Attention: heatmaps at multiples of the training length, a zoom, and the argmax-key trace (C4)."""

import numpy as np
import pandas as pd
import streamlit as st

from lengen_core.analysis.heatmap import MAX_HEATMAP_LENGTH, Heatmap
from lengen_core.config import ConfigError
from lengen.share import view_ints
from ui.address import stop
from ui.captions import attention as attention_captions
from ui.captions import show
from ui.captions.common import Caption
from ui.charts import common as charts
from ui.glossary import lead
from lengen.presets import HEATMAP_MULTIPLES
from ui.rules import maps as rule_maps
from ui.runs import allowed_lengths, heatmap
from ui.state import show_view, view_number, view_setting
from ui.widgets import chart, head_picker, refusal, require_length_task, run_summary, selected_run

st.title("Attention beyond the training length")
lead("attention")
run = selected_run()
if run is None:
    stop()
require_length_task(run)
run_summary(run)

L_train, k = run.config.task.train_length, run.config.task.offset
candidates = [m * L_train for m in HEATMAP_MULTIPLES if m * L_train <= MAX_HEATMAP_LENGTH]
lengths = allowed_lengths(run.run_id, candidates)


def linked_lengths(params: dict[str, list[str]]) -> list[int]:
    chosen = view_ints(params, "lengths", 2, MAX_HEATMAP_LENGTH, lengths[:4], max_count=len(candidates))
    if not set(chosen) <= set(lengths):
        raise ConfigError(f"link parameter 'lengths' has {sorted(set(chosen) - set(lengths))}: this run allows {lengths}")
    return list(chosen)


# A run with another training length has other choices: drop what no longer fits before drawing.
st.session_state["attention-lengths"] = [n for n in st.session_state.get("attention-lengths", lengths[:4]) if n in lengths]
if st.session_state.get("attention-trace") not in lengths:
    st.session_state.pop("attention-trace", None)
left, right = st.columns([2, 1])
with left:
    view_setting("attention-lengths", "lengths", linked_lengths, lengths[:4])
with right:
    view_number("attention-trace", "trace", 2, MAX_HEATMAP_LENGTH, lengths[min(2, len(lengths) - 1)], lengths)
shown = left.multiselect(
    "Lengths (multiples of the training length)", lengths, key="attention-lengths",
    format_func=lambda n: f"{n // L_train}× = {n}",
    help=f"Capped at {MAX_HEATMAP_LENGTH} tokens and at the end of a learned position table.",
)
trace_length = right.selectbox("Length for the zoom and the argmax trace", lengths, key="attention-trace",
                               help="Zoom onto the last queries and keys, and trace j*(t) at this length.")
show_view("lengths", ",".join(map(str, shown)) or None)
show_view("trace", str(trace_length))

expected = attention_captions.trace_expectation(run.config.model.encoding, run.config.model.attention)
learned = None if run.verdict is None else run.verdict.learned
last_only = run.config.task.task == "retrieval"  # the shift task scores every query t ≥ k
head, layer, head_index = None, 0, 0
if not run.config.model.minimal:  # the maps, zoom and trace read one head of one layer, chosen here
    heads = run.config.model.n_heads
    chosen = head_picker([f"L{i // heads}H{i % heads}" for i in range(run.config.model.n_layers * heads)], 0,
                         run.run_id, "attention-head", "Layer and head (only this head is computed)")
    layer, head_index = divmod(chosen, heads)
    head, expected = f"Layer {layer}, head {head_index}", None  # one head of several: no carrier-head claim
    st.info(f"This run has {run.config.model.n_layers} layers × {run.config.model.n_heads} heads: the maps below are "
            f"layer {layer}, head {head_index}. Which head carries the offset, and every head's carrier, is on the "
            "Transformer page.", icon=":material/stacks:")
def drawn(length: int) -> Heatmap | None:
    """The map at `length`, or None with the reason (a server budget, say) shown in its place."""
    try:
        return heatmap(run.run_id, length, layer=layer, head=head_index)
    except ConfigError as error:
        refusal(f"No map at L = {length:,}", error)
        return None


for i, length in enumerate(shown):
    if (result := drawn(length)) is None:
        continue
    if i % 2 == 0:  # a row of two per pair of lengths, so they stay in order when narrow screens stack them
        columns = st.columns(2)
    with columns[i % 2]:
        cells = result.weights.shape[0]
        said = attention_captions.trace_caption(attention_captions.argmax_trace(result.argmax_keys, L_train, k),
                                                expected, learned, last_only)
        show.chart_captioned(charts.attention_map(result.weights, result.pool, length, L_train, head),
                             Caption(said.lead, f"{said.more} Cells: {cells}×{cells}, pooling {result.pool}×{result.pool} "
                                                "(max)."),
                             pd.DataFrame(result.weights).rename_axis("query_cell").reset_index(), f"heatmap-{length}",
                             run.run_id)

if (result := drawn(trace_length)) is None:
    stop()
left, right = st.columns(2)
with left:
    target = trace_length - 1 - k
    zoom_frame = pd.DataFrame(result.zoom, index=result.zoom_first_query + np.arange(result.zoom.shape[0]),
                              columns=result.zoom_first_key + np.arange(result.zoom.shape[1]))
    on_target = zoom_frame.iloc[-1].get(target)  # None when the target key is outside the zoom
    chart(charts.zoom_map(result.zoom, result.zoom_first_query, result.zoom_first_key, target, head),
          attention_captions.zoom_caption(int(result.argmax_keys[-1]), target, on_target, learned),
          zoom_frame.rename_axis("query").reset_index(), f"zoom-{trace_length}", run.run_id)
with right:
    trace = pd.DataFrame({"query": np.arange(trace_length), "argmax_key": result.argmax_keys})
    show.chart_captioned(charts.argmax_trace(result.argmax_keys, L_train, k, head),
                         attention_captions.trace_caption(attention_captions.argmax_trace(result.argmax_keys, L_train, k),
                                                          expected, learned, last_only),
                         trace, f"argmax-{trace_length}", run.run_id)
rule_maps.attention_rule(run, lengths, layer, head_index, head)

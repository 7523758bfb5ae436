"""The Attention page: heatmaps at multiples of the training length, a zoom on the last queries and keys, and the
argmax-key trace j*(t) (C4), each of one head of one layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import streamlit as st

from lengen.presets import HEATMAP_MULTIPLES
from lengen.share import view_ints
from lengen_core.analysis.heatmap import MAX_HEATMAP_LENGTH, Heatmap
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui import widgets
from ui.address import stop
from ui.captions import attention as attention_captions
from ui.captions import show
from ui.captions.common import Caption
from ui.charts import common as charts
from ui.runs import allowed_lengths, heatmap
from ui.state import show_view, view_number, view_setting


@dataclass(frozen=True)
class Lengths:
    """The lengths this run's maps may be drawn at, those chosen, and the one of the zoom and the trace."""

    allowed: list[int]
    shown: list[int]
    trace: int


@dataclass(frozen=True)
class HeadShown:
    """The head the maps, zoom and trace read, and what its trace is expected to show."""

    layer: int
    head: int
    name: str | None  # "Layer 0, head 1" for a run of several heads; None: the minimal single head
    expected: Literal["relative", "pinned"] | None  # the single head's claim (lengen_core.claims); None: no claim


def length_controls(run: Run) -> Lengths:
    """The lengths (multiples of the training length, from the link or the first four) and the trace's length."""
    L_train = run.config.task.train_length
    candidates = [m * L_train for m in HEATMAP_MULTIPLES if m * L_train <= MAX_HEATMAP_LENGTH]
    lengths = allowed_lengths(run.run_id, candidates)

    def linked_lengths(params: dict[str, list[str]]) -> list[int]:
        chosen = view_ints(params, "lengths", 2, MAX_HEATMAP_LENGTH, lengths[:4], max_count=len(candidates))
        if not set(chosen) <= set(lengths):
            raise ConfigError(f"link parameter 'lengths' has {sorted(set(chosen) - set(lengths))}: this run allows "
                              f"{lengths}")
        return list(chosen)

    # A run with another training length has other choices: drop what no longer fits before drawing.
    st.session_state["attention-lengths"] = [n for n in st.session_state.get("attention-lengths", lengths[:4])
                                             if n in lengths]
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
    return Lengths(lengths, shown, trace_length)


def head_choice(run: Run) -> HeadShown:
    """The single head; or, for a run of several, the layer and head picked here, said in a note."""
    model = run.config.model
    expected = attention_captions.trace_expectation(model.encoding, model.attention)
    if model.minimal:
        return HeadShown(0, 0, None, expected)
    heads = model.n_heads  # the maps, zoom and trace read one head of one layer, chosen here
    chosen = widgets.head_picker([f"L{i // heads}H{i % heads}" for i in range(model.n_layers * heads)], 0, run.run_id,
                                 "attention-head", "Layer and head (only this head is computed)")
    layer, head_index = divmod(chosen, heads)
    st.info(f"This run has {model.n_layers} layers × {model.n_heads} heads: the maps below are "
            f"layer {layer}, head {head_index}. Which head carries the offset, and every head's carrier, is on the "
            "Transformer page.", icon=":material/stacks:")
    return HeadShown(layer, head_index, f"Layer {layer}, head {head_index}", None)  # one of several: no claim


def drawn(run: Run, length: int, head: HeadShown) -> Heatmap | None:
    """The map at `length`, or None with the reason (a server budget, say) shown in its place."""
    try:
        return heatmap(run.run_id, length, layer=head.layer, head=head.head)
    except ConfigError as error:
        widgets.refusal(f"No map at L = {length:,}", error)
        return None


def _trace_caption(run: Run, argmax_keys: np.ndarray, head: HeadShown) -> Caption:
    task = run.config.task
    learned = None if run.verdict is None else run.verdict.learned
    last_only = task.task == "retrieval"  # the shift task scores every query t ≥ k
    return attention_captions.trace_caption(attention_captions.argmax_trace(argmax_keys, task.train_length, task.offset),
                                            head.expected, learned, last_only)


def maps(run: Run, shown: list[int], head: HeadShown) -> None:
    """One map per chosen length, two to a row."""
    L_train = run.config.task.train_length
    for i, length in enumerate(shown):
        if (result := drawn(run, length, head)) is None:
            continue
        if i % 2 == 0:  # a row of two per pair of lengths, so they stay in order when narrow screens stack them
            columns = st.columns(2)
        with columns[i % 2]:
            cells = result.weights.shape[0]
            said = _trace_caption(run, result.argmax_keys, head)
            show.chart_captioned(charts.attention_map(result.weights, result.pool, length, L_train, head.name),
                                 Caption(said.lead, f"{said.more} Cells: {cells}×{cells}, pooling "
                                                    f"{result.pool}×{result.pool} (max)."),
                                 pd.DataFrame(result.weights).rename_axis("query_cell").reset_index(),
                                 f"heatmap-{length}", run.run_id)


def zoom_and_trace(run: Run, trace_length: int, head: HeadShown) -> None:
    """The zoom onto the last queries and keys beside the argmax-key trace, at `trace_length`."""
    if (result := drawn(run, trace_length, head)) is None:
        stop()
    L_train, k = run.config.task.train_length, run.config.task.offset
    learned = None if run.verdict is None else run.verdict.learned
    left, right = st.columns(2)
    with left:
        target = trace_length - 1 - k
        zoom_frame = pd.DataFrame(result.zoom, index=result.zoom_first_query + np.arange(result.zoom.shape[0]),
                                  columns=result.zoom_first_key + np.arange(result.zoom.shape[1]))
        on_target = zoom_frame.iloc[-1].get(target)  # None when the target key is outside the zoom
        widgets.chart(charts.zoom_map(result.zoom, result.zoom_first_query, result.zoom_first_key, target, head.name),
                      attention_captions.zoom_caption(int(result.argmax_keys[-1]), target, on_target, learned),
                      zoom_frame.rename_axis("query").reset_index(), f"zoom-{trace_length}", run.run_id)
    with right:
        trace = pd.DataFrame({"query": np.arange(trace_length), "argmax_key": result.argmax_keys})
        show.chart_captioned(charts.argmax_trace(result.argmax_keys, L_train, k, head.name),
                             _trace_caption(run, result.argmax_keys, head), trace, f"argmax-{trace_length}",
                             run.run_id)

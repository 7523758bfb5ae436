"""Inference rules on the Carrier and Attention pages (issue 17): how the carrier rules reshape s(Δ) and move
its near-recurrences at a chosen test length, and the attention map at a length under a chosen rule
beside the unmodified one. Every number in a caption is read from the run drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from lengen_core.analysis.heatmap import Heatmap
from lengen_core.analysis.rules import CARRIER_RULES
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui import widgets
from ui.captions.attention import argmax_trace
from ui.charts import common as charts
from ui.rules import captions as rule_captions
from ui.rules import charts as rule_charts
from ui.rules.runs import RuledCarrier, ruled_carrier, ruled_heatmap
from ui.rules.select import rule_selector
from ui.state import show_view, view_number

CARRIER_MULTIPLES = (2, 4, 8, 16, 32, 64)


def _length_picker(key: str, name: str, lengths: Sequence[int], train_length: int, label: str, help: str) -> int:
    default = 8 * train_length if 8 * train_length in lengths else lengths[-1]
    view_number(key, name, lengths[0], lengths[-1], default, lengths)
    chosen = st.select_slider(label, lengths, key=key, format_func=lambda n: f"{n // train_length}× = {n:,}", help=help)
    show_view(name, str(chosen))
    return chosen


def carrier_rules(run: Run, search: int) -> None:
    """The carrier rules at a chosen test length: s(Δ) under each over the unmodified one, peaks and
    near-recurrences."""
    st.subheader("Carrier rules: s(Δ) read at a longer length")
    st.markdown("Position Interpolation divides every position by s = L / L_train; NTK-aware scaling (and dynamic NTK) "
                "raises RoPE's base so its slow frequencies slow down; NTK-by-parts (YaRN's frequencies) divides "
                "only the slow pairs by s; LongRoPE divides each pair by its own factor from a table. Each reshapes "
                "the carrier s(Δ) the head reads, with the same weights. Blank parameter: its default at the "
                "length chosen here.")
    rules = rule_selector("carrier-rules", {"this run": run.config}, names=CARRIER_RULES, label="Carrier rules")
    L, k = run.config.task.train_length, run.config.task.offset
    if not rules:
        return
    length = _length_picker("carrier-at", "at", [m * L for m in CARRIER_MULTIPLES], L,
                            "Test length the rules are read at",
                            "The carrier under a rule depends on L: PI's s and NTK's α are L / L_train unless chosen.")
    try:
        found = [ruled_carrier(run.run_id, label, length, search) for label in ("none", *(r.label for r in rules))]
    except ConfigError as error:  # over this server's budget (lengen.budget)
        widgets.refusal("No carrier under the rules here", error)
        return
    _carrier_chart(run, found, length, L, k)
    _recurrences(run, found)


def _carrier_chart(run: Run, found: list[RuledCarrier], length: int, L: int, k: int) -> None:
    base = found[0]
    table = pd.concat([pd.DataFrame({"rule": c.label, "offset": c.offsets, "s": c.values}) for c in found],
                      ignore_index=True)
    peaks = {c.label: (peak := rule_captions.carrier_peak(c.offsets, c.values, c.label, length, L),
                       float(c.values[peak])) for c in found}
    captions = [rule_captions.carrier_caption(c.label, c.scale, c.offsets, c.values, base.values, length, L, k)
                for c in found[1:]]
    source = "read from the weights" if base.source == "analytic" else "measured (the expected logit at each offset)"
    widgets.chart(rule_charts.carrier_by_rule(table, L, k, peaks, min(length, len(base.offsets))),
                  " ".join(captions) + f" (Carriers {source}; stars mark each curve's peak in the range the training "
                                       "range maps to under its rule.)",
                  table, f"carrier-rules-{length}", run.run_id)


def _recurrences(run: Run, found: list[RuledCarrier]) -> None:
    if found[0].source != "analytic":
        st.caption("Near-recurrences are searched for analytic (RoPE) carriers only: this carrier is measured.")
        return
    rows = [{"rule": c.label, "near-recurrences": rule_captions.recurrence_count(len(c.near_recurrences)),
             "first offsets": ", ".join(f"{r.offset:,}" for r in c.near_recurrences[:5]) or "none",
             "closest gap (nats)": min((r.gap for r in c.near_recurrences), default=None),
             "searched up to": c.search_length} for c in found]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config={
        "near-recurrences": st.column_config.TextColumn(help="Far offsets (past the training length) where some "
                                                              "token pair's logit comes within ln 4 of the target's; "
                                                              "the search stops at 50."),
        "closest gap (nats)": st.column_config.NumberColumn(format="%.2f"),
    })
    L = run.config.task.train_length
    texts = [rule_captions.recurrence_text(c.label, [r.offset for r in c.near_recurrences], c.search_length,
                                           rule_captions.carrier_peak(c.offsets, c.values, c.label, c.length, L), L)
             for c in found]
    st.caption(f"**Near-recurrences**, far keys that can take a quarter of the target's weight: {'; '.join(texts)}.")


def _target_weight(result: Heatmap, target: int) -> float | None:
    column = target - result.zoom_first_key
    return float(result.zoom[-1, column]) if 0 <= column < result.zoom.shape[1] else None


def attention_rule(run: Run, lengths: Sequence[int], layer: int, head: int, head_name: str | None) -> None:
    """The map at a chosen length (8× by default) under one chosen rule, beside the unmodified map."""
    st.subheader("The map under an inference rule")
    rules = rule_selector("attention-rules", {"this run": run.config}, max_rules=1, label="Inference rule")
    L, k = run.config.task.train_length, run.config.task.offset
    if not rules:
        return
    length = _length_picker("attention-rule-length", "rule-length", list(lengths), L, "Length the rule is read at",
                            "The rule's scale (log n, s = L / L_train) is taken at this length.")
    maps = {}
    for label in ("none", rules[0].label):
        try:
            maps[label] = ruled_heatmap(run.run_id, label, length, layer, head)
        except ConfigError as error:  # over this server's budget (lengen.budget)
            widgets.refusal(f"No map under {label} at L = {length:,}", error)
            return
    target = length - 1 - k
    base = (argmax_trace(maps["none"].argmax_keys, L, k), _target_weight(maps["none"], target))
    for column, (label, result) in zip(st.columns(2), maps.items(), strict=True):
        with column:
            trace = argmax_trace(result.argmax_keys, L, k)
            caption = rule_captions.map_caption(label, trace, _target_weight(result, target),
                                                None if label == "none" else base)
            name = label if head_name is None else f"{label} · {head_name}"
            widgets.chart(charts.attention_map(result.weights, result.pool, length, L, name), caption,
                          pd.DataFrame(result.weights).rename_axis("query_cell").reset_index(),
                          f"rule-heatmap-{label}-{length}", run.run_id)
    weights = np.asarray([w for w in (base[1], _target_weight(maps[rules[0].label], target)) if w is not None])
    if len(weights) == 2:
        st.caption(f"The last query's weight on its target goes from {weights[0]:.2f} to {weights[1]:.2f} under "
                   f"{rules[0].label} at {length // L}× the training length.")

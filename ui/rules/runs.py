"""Cached analyses of a run read under an inference rule (lengen_core.analysis.rules), keyed by run id and the
rule's label ("log-n", "ntk:4"), parsed inside: a label is a plain string the caches can key on.

Like `ui.runs`, nothing here changes the shared model: `under_rule` gives a view that shares its weights.
A run's measurement under a rule (evaluation, prediction, law, horizons) is lengen_core.measure's, the call of
`ui.runs.measurement` and the command line's `evaluate --rule`; `ruled_measurement` makes it in two cached
parts, so the bar says which runs (the evaluation and the prediction at every length, then the predicted
horizon's search, each length under a rule a sweep of its own). Here too are the carrier and the attention
map under a rule, and `price`, which checks a whole request (every rule's measurement) against this
server's budgets before any of its work starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from lengen import budget
from lengen.budget import check_attention_map, check_carrier
from lengen_core.analysis.carrier import (
    NearRecurrence,
    carrier_values,
    extract_carrier,
    find_near_recurrences,
    token_coefficients,
)
from lengen_core.analysis.heatmap import Heatmap, attention_heatmap
from lengen_core.analysis.rules import parse_rule, under_rule
from lengen_core.measure import Measurement, check_measurement, measure, search_predicted_horizon
from ui.rules.shipped import shipped_measurement
from ui.runs import Progress, heatmap, load_run, measurement


def price(run_id: str, labels: Sequence[str], lengths: tuple[int, ...], samples: int) -> None:
    """Every rule's measurement at `lengths` (`ruled_measurement`), checked before any work (ConfigError
    if over), as lengen_core.measure checks each before its own; one shipped with a preset costs nothing
    (`ui.rules.shipped`) and is not priced."""
    run = load_run(run_id)
    for label in labels:
        if shipped_measurement(run, label, lengths, samples) is None:
            check_measurement(run, lengths, samples, parse_rule(label), prices=budget)


def ruled_measurement(run_id: str, label: str, lengths: tuple[int, ...], samples: int,
                      progress: Progress) -> Measurement:
    """`measure` under the rule `label` (the rule none: `ui.runs.measurement`, shared with the Dilution page),
    the evaluation and prediction first, then the predicted horizon's search, each said on `progress`: the
    same Measurement as one call (lengen_core.measure.search_predicted_horizon says how the two fit)."""
    if parse_rule(label).trivial:
        return measurement(run_id, lengths, samples, label, progress)
    progress.doing(f"evaluating and predicting {len(lengths)} lengths under {label}")
    m = _evaluated(run_id, label, lengths, samples)
    progress.doing(f"searching the predicted horizon under {label} (up to {m.horizon_ceiling:,})")
    horizon, note = _searched(run_id, label, m.horizon_ceiling, tuple((p.length, p.accuracy) for p in m.predictions))
    return dataclasses.replace(m, predicted_horizon=horizon, horizon_note=note)


@st.cache_data(show_spinner=False, max_entries=128)  # the bar says what is going on
def _evaluated(run_id: str, label: str, lengths: tuple[int, ...], samples: int) -> Measurement:
    return measure(load_run(run_id), lengths, samples, parse_rule(label), prices=budget, search=False)


@st.cache_data(show_spinner=False, max_entries=128)
def _searched(run_id: str, label: str, ceiling: int, known: tuple[tuple[int, float], ...] = ()):
    """The predicted horizon under the rule up to `ceiling` (`search_ceiling`: the longest length measured), and its
    note; `known`: the measurement's predicted accuracies (length, accuracy), not predicted again."""
    return search_predicted_horizon(load_run(run_id), parse_rule(label), ceiling, None, budget, known=dict(known))


@dataclass(frozen=True)
class RuledCarrier:
    """s(Δ) of a run read under a rule at one test length, with its near-recurrences."""

    label: str
    length: int  # the test length the rule is read at
    scale: float  # the rule's s (or α) there
    source: str  # "analytic" (RoPE, from the weights) or "measured"
    offsets: np.ndarray
    values: np.ndarray
    near_recurrences: tuple[NearRecurrence, ...]  # analytic carriers only
    search_length: int


@st.cache_data(show_spinner="Reading the carrier under the rule…", max_entries=64)
def ruled_carrier(run_id: str, label: str, length: int, search_length: int) -> RuledCarrier:
    """s(Δ) at Δ = 0 … length − 1 under the rule (analytic: from the view's frequencies; else measured)."""
    run = load_run(run_id)
    rule = parse_rule(label)
    rule.check(run.config)
    check_carrier(run.config, search_length)  # this server's budgets (lengen.budget)
    view = under_rule(run.model, rule, length)
    scale = rule.scale(length, run.config.task.train_length)
    if not getattr(view.encoding, "rotary", False):
        found = extract_carrier(view, run.config, search_length=search_length)
        return RuledCarrier(label, length, scale, found.source, found.offsets, found.values, (), search_length)
    coefficients = token_coefficients(view).mean(dim=(0, 1))  # (D/2,) complex, the token average
    offsets = torch.arange(length)
    values = carrier_values(coefficients, view.encoding.frequencies.cpu(), offsets).numpy()
    return RuledCarrier(label, length, scale, "analytic", offsets.numpy(), values,
                        find_near_recurrences(view, run.config, search_length), search_length)


def ruled_heatmap(run_id: str, label: str, length: int, layer: int = 0, head: int = 0) -> Heatmap:
    """The attention map at `length` under the rule (the run's own for none)."""
    if parse_rule(label).trivial:
        return heatmap(run_id, length, layer=layer, head=head)
    return _heatmap(run_id, label, length, layer, head)


@st.cache_data(show_spinner="Computing attention under the rule…", max_entries=64)
def _heatmap(run_id: str, label: str, length: int, layer: int, head: int) -> Heatmap:
    run = load_run(run_id)
    check_attention_map(run.config, length, layer)  # this server's budgets (lengen.budget)
    return attention_heatmap(under_rule(run.model, parse_rule(label), length), run.config, length, layer=layer,
                             head=head)

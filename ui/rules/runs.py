"""Cached analyses of a run read under an inference rule (lengen_core.analysis.rules), keyed by run id and the
rule's label ("log-n", "ntk:4"), parsed inside: a label is a plain string the caches can key on.

Like `ui.runs`, nothing here changes the shared model: `under_rule` gives a view that shares its weights.
The rule `none` is the run as trained and goes to `ui.runs` and `ui.analyses`, so it shares their caches
(a preset's shipped numbers too). Measurements and predictions are cached length by length, as
`ui.runs.evaluation` is: a ruled prediction costs one sweep per length anyway. `price` checks a whole
request against this server's budgets before any of its work starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from lengen_core.analysis.carrier import (
    NearRecurrence,
    carrier_values,
    extract_carrier,
    find_near_recurrences,
    token_coefficients,
)
from lengen_core.analysis.dilution import Prediction, predict
from lengen_core.analysis.evaluate import LengthReport, check_lengths, check_sweep, evaluate
from lengen_core.analysis.fit import FitResult
from lengen_core.analysis.heatmap import Heatmap, attention_heatmap
from lengen_core.analysis.horizon import RULE_RESOLUTION, Horizon, search_horizon
from lengen_core.analysis.horizon import predicted_horizon as find_horizon
from lengen_core.analysis.rules import parse_rule, under_rule
from lengen_core.analysis.sequence import SequenceReport, evaluate_sequence
from lengen_core.serving.budget import (
    check_attention_map,
    check_carrier,
    check_horizon,
    check_prediction,
    check_sequence_evaluation,
    check_single_head_evaluation,
    prediction_fits,
)
from ui.analyses import sequence_evaluation
from ui.runs import Progress, evaluation, heatmap, law_of, length_by_length, load_run, prediction


def price(run_id: str, labels: Sequence[str], lengths: tuple[int, ...], samples: int) -> None:
    """Every rule's evaluation and prediction at `lengths`, checked before any work (ConfigError if over)."""
    run = load_run(run_id)
    check_lengths(run.config, run.model, lengths)
    check_sweep(lengths, samples)
    for label in labels:
        rule = parse_rule(label)
        rule.check(run.config)
        if run.config.single_head:
            check_single_head_evaluation(run.config, lengths, samples)
            check_prediction(run.config, lengths, rule)
        else:
            check_sequence_evaluation(run.config, lengths, samples)


def ruled_evaluation(run_id: str, label: str, lengths: tuple[int, ...], samples: int,
                     progress: Progress | None = None) -> list[LengthReport] | list[SequenceReport]:
    """The run's evaluation under the rule: the last query (single head) or every position (transformer)."""
    run = load_run(run_id)
    if parse_rule(label).trivial:
        return (evaluation if run.config.single_head else sequence_evaluation)(run_id, lengths, samples, progress)
    price(run_id, [label], lengths, samples)
    measure = _evaluation_at if run.config.single_head else _sequence_at
    return length_by_length(lengths, lambda n: measure(run_id, label, n, samples), progress, f"Evaluating under {label}")


@st.cache_data(show_spinner=False, max_entries=1024)  # the bar says what is going on
def _evaluation_at(run_id: str, label: str, length: int, samples: int) -> LengthReport:
    run = load_run(run_id)
    return evaluate(run.model, run.config, [length], samples=samples, rule=parse_rule(label))[0]


@st.cache_data(show_spinner=False, max_entries=1024)
def _sequence_at(run_id: str, label: str, length: int, samples: int) -> SequenceReport:
    run = load_run(run_id)
    return evaluate_sequence(under_rule(run.model, parse_rule(label), length), run.config, [length], samples=samples)[0]


def ruled_prediction(run_id: str, label: str, lengths: tuple[int, ...],
                     progress: Progress | None = None) -> list[Prediction]:
    """The prediction from the weights under the rule, checked as one request, cached length by length."""
    if parse_rule(label).trivial:
        return prediction(run_id, lengths)
    run = load_run(run_id)
    check_prediction(run.config, lengths, parse_rule(label))
    return length_by_length(lengths, lambda n: _prediction_at(run_id, label, n), progress, f"Predicting under {label}")


@st.cache_data(show_spinner=False, max_entries=1024)
def _prediction_at(run_id: str, label: str, length: int) -> Prediction:
    run = load_run(run_id)
    return predict(run.model, run.config, [length], rule=parse_rule(label))[0]


def ruled_law(run_id: str, label: str, lengths: tuple[int, ...], reports: list[LengthReport]) -> FitResult:
    """The dilution law fitted to the reports read under the rule, far keys weighed by its prediction."""
    return law_of(run_id, lengths, reports, lambda at: ruled_prediction(run_id, label, at))


@st.cache_data(show_spinner="Finding the horizon under the rule from the weights…", max_entries=64)
def ruled_horizon(run_id: str, label: str, ceiling: int) -> Horizon:
    """The predicted horizon under the rule, looked for up to `ceiling` (the longest length the page
    measured: past it, a ruled search costs a sweep per length and can run for minutes), priced first."""
    run = load_run(run_id)
    rule = parse_rule(label)
    check_horizon(run.config, ceiling, rule)  # this server's budgets (lengen_core.serving.budget)
    afford = prediction_fits(run.config, rule=rule)
    if rule.trivial:
        return find_horizon(run.model, run.config, ceiling=ceiling, afford=afford)
    # lengen_core.analysis.horizon.predicted_horizon's search, its accuracy read from the per-length cache: the
    # doublings are the lengths the page predicted already
    return search_horizon(lambda lengths: [_prediction_at(run_id, label, n).accuracy for n in lengths],
                          run.config.task.train_length, ceiling, afford=afford, relative=RULE_RESOLUTION)


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
    check_carrier(run.config, search_length)  # this server's budgets (lengen_core.serving.budget)
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
    check_attention_map(run.config, length, layer)  # this server's budgets (lengen_core.serving.budget)
    return attention_heatmap(under_rule(run.model, parse_rule(label), length), run.config, length, layer=layer,
                             head=head)

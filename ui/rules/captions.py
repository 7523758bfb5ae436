"""Captions and table cells for inference rules, each computed from the run's own numbers. No Streamlit.

A rule "helps" or "hurts" at a length only where its 95% Wilson interval of accuracy and the
unmodified run's do not overlap, or where its target mass differs by more than MASS_DIFFERENCE; the
sentence names the length and both numbers, so a rule that hurts (PI on a fixed-offset task) says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lengen_core.analysis.fit import FitResult
from lengen_core.analysis.horizon import Horizon, measured_horizon
from lengen_core.analysis.rules import parse_rule
from lengen_core.thresholds import ACCURACY_BAR
from ui.captions.accuracy import NO_LAW_TEXT, m_out_text
from ui.captions.attention import ArgmaxTrace
from ui.captions.common import percent, share

MASS_DIFFERENCE = 0.02  # target masses closer than this are "the same" (their s.e.m. is below 0.01 at 64 samples)
KEEPS_MASS = 0.9  # a rule "keeps p" where p is at least this share of its mass at the training length
NO_LAW = {"too_few_points": "too few lengths with p > 2/V", "not_learned": "not learned", "no_dilution": NO_LAW_TEXT["no_dilution"],
          "not_monotone": NO_LAW_TEXT["not_monotone"], "at_chance": "at chance past training", "not_applicable": "transformer"}


@dataclass(frozen=True)
class RuleCurve:
    """One rule's measured and predicted numbers at the lengths of a page (predicted: None for a transformer)."""

    rule: str
    lengths: Sequence[int]
    accuracy: Sequence[float]
    accuracy_low: Sequence[float]
    accuracy_high: Sequence[float]
    target_mass: Sequence[float]
    predicted_accuracy: Sequence[float] | None = None
    predicted_mass: Sequence[float] | None = None


def _times(length: int, train_length: int) -> str:
    return f"{length // train_length:,}×" if length % train_length == 0 else f"{length / train_length:.1f}×"


def effect(curve: RuleCurve, base: RuleCurve, train_length: int, chance: float, offset: int,
           learned: bool | None = True) -> str:
    """'**log-n** keeps p at 0.97 at 4,096 (256×) where the unmodified run falls to 0.20; …'. For a run
    that did not learn (`learned` False) the numbers only: there is no trained rule for PI to move."""
    text = _effect(curve, base, train_length, chance, offset, learned is not False)
    return text if learned is not False else f"{text[:-1]} (this run did not learn the task: numbers only)."


def _effect(curve: RuleCurve, base: RuleCurve, train_length: int, chance: float, offset: int, learned: bool) -> str:
    name = f"**{curve.rule}**"
    past = [i for i, n in enumerate(curve.lengths) if n > train_length]
    if not past:
        return f"{name}: no length past the training length was measured."
    worse = [i for i in past if curve.accuracy_high[i] < base.accuracy_low[i]]
    better = [i for i in past if curve.accuracy_low[i] > base.accuracy_high[i]]
    last = past[-1]
    n, p, p0 = curve.lengths[last], curve.target_mass[last], base.target_mass[last]
    at = f"{n:,} ({_times(n, train_length)})"
    if worse:
        i = worse[0]
        m = curve.lengths[i]
        text = (f"{name} hurts: accuracy {share(curve.accuracy[i])} at {m:,} ({_times(m, train_length)}) where the "
                f"unmodified run has {share(base.accuracy[i])}")
        if curve.accuracy_low[i] <= chance:
            text += f", at chance (1/V = {share(chance)})"
        if learned and parse_rule(curve.rule).name == "pi":
            s = parse_rule(curve.rule).scale(m, train_length)
            text += (f". PI compresses positions by s = {s:g} there, so the carrier's peak moves from k = {offset} to "
                     f"k·s = {offset * s:g}: the head trained to read offset {offset} now reads the wrong key")
        return text + "."
    if p > p0 + MASS_DIFFERENCE:
        kept = p >= KEEPS_MASS * curve.target_mass[curve.lengths.index(train_length)] if train_length in curve.lengths else False
        verb = "keeps p at" if kept else "raises p to"
        text = f"{name} {verb} {share(p)} at {at} where the unmodified run falls to {share(p0)}"
        if better:
            j = better[-1]
            text += (f"; accuracy {share(curve.accuracy[j])} against {share(base.accuracy[j])} at "
                     f"{curve.lengths[j]:,}, outside each other's 95% intervals")
        else:
            text += (f"; accuracy {share(curve.accuracy[last])} against {share(base.accuracy[last])} there, within "
                     "each other's 95% intervals at every length")
        return text + "."
    if p < p0 - MASS_DIFFERENCE:
        same = ", within each other's 95% intervals at every length" if not better else ""
        return (f"{name} lowers p: {share(p)} at {at} against {share(p0)} unmodified; accuracy {share(curve.accuracy[last])} "
                f"against {share(base.accuracy[last])}{same}.")
    return (f"{name} changes little: p {share(p)} at {at} against {share(p0)} unmodified, accuracy "
            f"{share(curve.accuracy[last])} against {share(base.accuracy[last])}.")


def tracking(curve: RuleCurve) -> str | None:
    """How close the prediction from the weights is to the measurement at every length (None: none made)."""
    if curve.predicted_accuracy is None:
        return None
    accuracy = np.abs(np.subtract(curve.predicted_accuracy, curve.accuracy))
    mass = np.abs(np.subtract(curve.predicted_mass, curve.target_mass))
    worst = int(np.argmax(accuracy))
    where = f" (worst at {curve.lengths[worst]:,})" if accuracy.max() >= 0.005 else ""
    return f"{curve.rule}: predicted within {accuracy.max():.2f} of the measured accuracy{where} and {mass.max():.2g} of p"


def law_cell(fit: FitResult, curve: RuleCurve, train_length: int) -> tuple[str, str | None]:
    """m_out with its 95% interval where the law describes the run under the rule, else a short 'no law: …'
    (never a figure) and the sentence saying why: a fit to a p that does not fall with length (a rule
    that stops dilution) is answered `no_dilution` by the fit itself, and has no finite m_out."""
    where = "this run" if curve.rule == "none" else f"this run under {curve.rule}"
    if fit.status in ("no_dilution", "not_monotone"):  # lengen_core.analysis.fit decides, from p and its errors
        return f"no law: {NO_LAW[fit.status]}", f"The law does not describe {where}. {fit.reason}"
    if fit.fit is None:
        why = NO_LAW.get(fit.status, fit.status)
        return f"no law: {why}", f"The law does not describe {where}: {why}."
    if fit.fit.holds:  # the interval to quote; the page's caption gives the answers' alone
        return m_out_text(fit, answers=False), None
    off = f"{fit.fit.max_relative_error:.0%}"
    return f"no law: off by {off}", (f"The law does not describe {where}: the best fit misses by {off} at "
                                      f"{fit.fit.worst_length:,}.")


UP_TO, BELOW = f"accuracy ≥ {ACCURACY_BAR:g} up to", f"falls below {ACCURACY_BAR:g} by"  # the rules table's columns


def horizon_cells(horizon: Horizon | None, refused: str | None = None) -> tuple[str, str]:
    """A horizon as two cells a student reads, 'accuracy ≥ 0.9 up to' and 'falls below 0.9 by' (lengths
    in tokens): ('2,808', '2,832'); ('≥ 65,536', 'not by 65,536, the longest looked at'); ('none', '16, the
    training length'); the reason in both when the search was not run here."""
    if refused is not None:
        return f"not computed here: {refused}", "—"
    if horizon is None:
        return "—", "—"
    if horizon.length is None:
        return "none", f"{horizon.below:,}, at the training length" if horizon.below else "the training length"
    up_to = f"{horizon.length:,}" if horizon.below is not None else f"≥ {horizon.length:,}"
    if not horizon.resolved:
        return up_to, ("not found: the search stopped at this server's budget" if horizon.below is None
                       else f"{horizon.below:,} (the search stopped at this server's budget)")
    if horizon.below is None:
        return up_to, f"not by {horizon.ceiling:,}, the longest looked at"
    return up_to, f"{horizon.below:,}"


def measured_cells(lengths: Sequence[int], accuracy: Sequence[float], train_length: int) -> tuple[str, str]:
    """The horizon on the measured lengths, as `horizon_cells` writes it."""
    return horizon_cells(measured_horizon(lengths, accuracy, train_length))


def carrier_peak(offsets: Sequence[int], values: Sequence[float], rule: str, length: int, train_length: int) -> int:
    """Where s(Δ) peaks within the offsets the training range maps to under the rule (0 … L_train/f − 1,
    f the rule's position factor at `length`; the training range itself for rules that keep positions)."""
    end = min(length, int(np.ceil(train_length / parse_rule(rule).position_factor(length, train_length))))
    window = np.asarray(values)[np.asarray(offsets) < end]
    return int(np.argmax(window))


def carrier_caption(rule: str, scale: float, offsets: Sequence[int], values: Sequence[float],
                    base_values: Sequence[float], length: int, train_length: int, offset: int) -> str:
    """'**pi** (s = 8 at L = 128): the peak moves from Δ = 3 to Δ = 24 (k·s = 24); s(k) …'."""
    parsed = parse_rule(rule)
    base_peak = carrier_peak(offsets, base_values, "none", length, train_length)
    peak = carrier_peak(offsets, values, rule, length, train_length)
    moved = f"stays at Δ = {peak:,}" if peak == base_peak else f"moves from Δ = {base_peak:,} to Δ = {peak:,}"
    expected = f" (k·s = {offset * scale:g})" if parsed.position_factor(length, train_length) != 1.0 else ""
    return (f"**{rule}** ({parsed.setting_at(length, train_length)} at L = {length:,}): the peak {moved}{expected}; at Δ = k = {offset} "
            f"s is {values[offset]:.2f} nats against {base_values[offset]:.2f} unmodified, "
            f"{values[peak] - values[offset]:.2f} below its peak.")


def recurrence_count(count: int, limit: int = 50) -> str:
    """'12', or '50 or more' where the search stopped at its limit."""
    return f"{count} or more" if count >= limit else f"{count}"


def recurrence_text(rule: str, offsets: Sequence[int], search_length: int, peak: int, train_length: int,
                    limit: int = 50) -> str:
    """'**ntk**: 5 up to 65,536, the first at 656, 782, 933'; where the rule moved the peak itself past the
    training length (PI), the search starts inside the peak and says so."""
    if not offsets:
        return f"**{rule}**: none up to {search_length:,}"
    count = recurrence_count(len(offsets), limit)
    text = f"**{rule}**: {count} up to {search_length:,}, the first at {', '.join(f'{n:,}' for n in offsets[:3])}"
    if peak >= train_length:
        text += (f" (its peak moved past the training length, to Δ = {peak:,}: the search, which starts at "
                 f"Δ = {train_length}, counts the offsets around it)")
    return text


def map_caption(rule: str, trace: ArgmaxTrace, target_weight: float | None, base: tuple[ArgmaxTrace, float | None] | None) -> str:
    """The last query's argmax key and its weight on the target, the share of queries past training on
    t − k; with `base` (the unmodified map's trace and target weight), the same numbers beside it."""
    target = trace.length - 1 - trace.offset
    where = "= t − k, the target" if trace.last_key == target else f"(the target t − k is {target:,})"
    text = f"**{rule}** at L = {trace.length:,}: the last query attends most to key {trace.last_key:,} {where}"
    if target_weight is not None:
        text += f", weight {share(target_weight)} on the target"
    if trace.relative_beyond is not None:
        text += f"; {percent(trace.relative_beyond)} of the {trace.beyond:,} queries past training attend most to t − k"
    if base is not None:
        base_trace, base_weight = base
        numbers = [] if base_weight is None else [f"weight {share(base_weight)} on the target"]
        if base_trace.relative_beyond is not None:
            numbers.append(f"{percent(base_trace.relative_beyond)} on t − k")
        text += f" (unmodified: {', '.join(numbers)})" if numbers else ""
    return text + "."

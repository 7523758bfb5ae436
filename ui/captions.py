"""Captions computed from the run they describe: plain numbers in, a sentence out. No Streamlit.

A fixed sentence about a chart is a claim the next run may contradict; each function here states
what *this* run shows, from its own numbers, and says so plainly when the run contradicts the claim
the chart is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lengen_core.carrier import ALIGNMENT_MARGIN
from lengen_core.config import RunConfig
from lengen_core.evaluate import wilson_interval
from lengen_core.fit import FitResult
from lengen_core.heads import PIN_SHARE, HeadReport
from lengen_core.verdict import CHANCE_TOLERANCE, LEARNED_ACCURACY, Verdict


def share(value: float) -> str:
    """An accuracy or a mass as people read it: 0.81, 0.062, 0.0003."""
    if value >= 0.095 or value == 0:
        return f"{value:.2f}"
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def verdict_text(verdict: Verdict, train_length: int, limit: str | None = None) -> str:
    """'Learned the task: accuracy 1.00 at the training length 16 (95% …); at chance past it: …'.
    `limit` says why the model cannot learn it (an encoding's single-head limit), for a run that did not."""
    interval = (f"(95% interval {verdict.in_range_low:.3f}–{verdict.in_range_high:.3f}, "
                f"{verdict.answers:,} fresh answers)")
    head = "Learned the task" if verdict.learned else "Did not learn the task"
    text = f"**{head}**: accuracy {share(verdict.in_range_accuracy)} at the training length {train_length} {interval}"
    if not verdict.learned:
        text += f", below the {LEARNED_ACCURACY:.2f} a learned task needs"
    if verdict.beyond_length is not None:
        where = "at chance" if verdict.at_chance_beyond else "above chance"
        text += (f"; {where} past it: {share(verdict.beyond_accuracy)} at length {verdict.beyond_length} "
                 f"(chance {share(verdict.chance)})")
    text += "."
    return f"{text} {limit}" if limit and not verdict.learned else text


def accuracy_points(lengths: Sequence[int], accuracies: Sequence[float], train_length: int,
                    multiples: Sequence[int] = (1, 4, 16, 64)) -> str:
    """'0.81 at 1×, 0.21 at 4×' for the multiples of the training length that were measured."""
    by_length = dict(zip(lengths, accuracies, strict=True))
    parts = [f"{share(by_length[m * train_length])} at {m}×" for m in multiples if m * train_length in by_length]
    if not parts:  # no exact multiples: the first and the last measured lengths
        parts = [f"{share(accuracies[i])} at L = {lengths[i]:,}" for i in sorted({0, len(lengths) - 1})]
    return ", ".join(parts)


def first_length_below(lengths: Sequence[int], accuracies: Sequence[float], threshold: float) -> int | None:
    """The first measured length whose accuracy is below `threshold` (None: it never falls that low)."""
    return next((n for n, a in zip(lengths, accuracies, strict=True) if a < threshold), None)


# --- What each chart claims, and whether this run bears it out --------------------------------------
#
# The accuracy charts claim (docs/science.md §1): RoPE with softmax attention stays near 1 past its training
# length (C1); a learned table (C1) and linear attention (C7) fall to chance there. The attention
# charts claim: RoPE follows j* = t − k (C3), a learned table pins inside the training range (C4).
# Other encodings carry no claim: their captions state the numbers only. Neither does a run whose
# verdict says it did not learn: its captions say what it shows and that it did not learn.

PREDICTION_TOLERANCE = 0.1  # the predicted p "tracks" the measured p when within this at every length
TOEPLITZ_UNCHANGED = 0.02  # a trained Toeplitz fraction this close to its untrained one is unchanged
NEAR_ONE = LEARNED_ACCURACY  # "near 1": the verdict's bar for having learned the task (0.9)
RELATIVE_ENCODINGS = ("rope", "alibi", "nope")  # logits depend on t − u alone, trained or not


def expectation(encoding: str, attention: str) -> Literal["extrapolates", "chance"] | None:
    """What the accuracy charts claim for a run of this kind (None: no claim)."""
    if attention == "linear":
        return "chance"  # C7
    return {"rope": "extrapolates", "learned": "chance"}.get(encoding)  # C1


def _kind(encoding: str, attention: str) -> str:
    """'RoPE', 'learned-position', 'linear-attention': how a caption names the run it contradicts."""
    if attention == "linear":
        return "linear-attention"
    return {"rope": "RoPE", "learned": "learned-position"}.get(encoding, encoding)


def _times(length: int, train_length: int) -> str:
    """64 → '4×' for L_train 16."""
    return f"{length // train_length}×" if length % train_length == 0 else f"{length / train_length:.1f}×"


def _percent(value: float) -> str:
    return f"{value:.0%}"


def horizon(lengths: Sequence[int], accuracies: Sequence[float], threshold: float = NEAR_ONE) -> int | None:
    """The largest measured length up to which every accuracy is ≥ `threshold`;
    None when the first one is already below."""
    below = first_length_below(lengths, accuracies, threshold)
    kept = [n for n in lengths if below is None or n < below]
    return kept[-1] if kept else None


def chance_from(lengths: Sequence[int], lows: Sequence[float], chance: float, after: int) -> int | None:
    """The first length past `after` from which every measured accuracy is at chance: its 95% interval's
    lower end within the verdict's CHANCE_TOLERANCE of chance (the verdict's own rule)."""
    start = None
    for length, low in zip(lengths, lows, strict=True):
        if length <= after:
            continue
        start = (start or length) if low <= chance + CHANCE_TOLERANCE else None
    return start


@dataclass(frozen=True)
class Curve:
    """One run's accuracy against length, as a caption reads it."""

    label: str
    encoding: str
    attention: str
    train_length: int
    chance: float
    lengths: Sequence[int]
    accuracy: Sequence[float]
    accuracy_low: Sequence[float]  # 95% interval, lower end
    learned: bool | None  # the run's verdict (None: not judged)
    claim: str = "C1"  # the claim the chart tests for this run
    every_position: bool = False  # accuracy over every position t ≥ k (shift task), inside training included


def run_curve(label: str, config: RunConfig, verdict: Verdict | None, lengths: Sequence[int],
              accuracy: Sequence[float], accuracy_low: Sequence[float], every_position: bool = False) -> Curve:
    """A Curve from a run's config and verdict and its measured accuracies; `every_position`: they score
    every position t ≥ k of the shift task, not the positions past training alone (no claim is read)."""
    claim = "C7" if config.model.attention == "linear" else "C1"
    return Curve(label, config.model.encoding, config.model.attention, config.task.train_length,
                 1 / config.task.vocab_size, tuple(lengths), tuple(accuracy), tuple(accuracy_low),
                 None if verdict is None else verdict.learned, claim + (", C8" if config.model.n_layers > 0 else ""),
                 every_position)


def curve_caption(curve: Curve, multiples: Sequence[int] = (1, 2, 4)) -> str:
    """'**RoPE**: 1.00 at 1×, …; ≥ 0.90 up to 64 (4×), at chance from 2,048 (128×) on: it stays near 1 …'."""
    L, name = curve.train_length, f"**{curve.label}**"
    points = accuracy_points(curve.lengths, curve.accuracy, L, multiples)
    top = horizon(curve.lengths, curve.accuracy)
    floor = chance_from(curve.lengths, curve.accuracy_low, curve.chance, L)
    half = first_length_below(curve.lengths, curve.accuracy, 0.5)
    facts = [f"≥ {NEAR_ONE:.2f} up to {top:,} ({_times(top, L)})"] if top is not None else []
    if half is not None and half != floor:
        facts.append(f"below 0.5 from {half:,} ({_times(half, L)})")
    facts.append(f"at chance from {floor:,} ({_times(floor, L)}) on" if floor is not None
                 else f"above chance up to {curve.lengths[-1]:,}")
    numbers = f"{points}; {', '.join(facts)}"
    if curve.learned is False:
        return f"{name} did not learn the task (a learned task needs ≥ {NEAR_ONE:.2f} at 1×), so it tests no claim: {numbers}."
    past = [(n, a, low) for n, a, low in zip(curve.lengths, curve.accuracy, curve.accuracy_low, strict=True) if n > L]
    expected, claim = expectation(curve.encoding, curve.attention), curve.claim
    if curve.every_position:
        return (f"{name}: {numbers} (over every position t ≥ k, those inside training included; the Transformer "
                "page scores the positions past training alone).")
    if expected is None or not past:
        return f"{name}: {numbers}."
    length, accuracy, low = past[0]
    kind = _kind(curve.encoding, curve.attention)
    if expected == "extrapolates":
        if top is not None and top > L:
            return f"{name}: {numbers}. It stays near 1 past its training length ({claim})."
        return (f"{name}: {numbers}. This {kind} run does NOT stay near 1 past its training length: "
                f"{share(accuracy)} at {length:,} ({_times(length, L)}), where {claim} says it should.")
    if floor == length:
        return f"{name}: {numbers}. It falls to chance at the first length past training ({claim})."
    return (f"{name}: {numbers}. This {kind} run does NOT fall to chance past its training length: "
            f"{share(accuracy)} at {length:,} ({_times(length, L)}), 95% interval from {share(low)}, "
            f"against chance {share(curve.chance)}.")


def curves_caption(curves: Sequence[Curve], multiples: Sequence[int] = (1, 2, 4), note: str = "") -> str:
    """Each run's sentence, then chance (and `note`, e.g. what the bands are)."""
    chance = min(c.chance for c in curves)
    return " ".join([*(curve_caption(c, multiples) for c in curves), f"Chance 1/V = {share(chance)}.", note]).strip()


def _did_not_learn(learned: bool | None) -> str:
    return " This run did not learn the task, so it tests no claim." if learned is False else ""


def mass_caption(label: str, lengths: Sequence[int], measured: Sequence[float], predicted: Sequence[float] | None,
                 fit: FitResult, train_length: int) -> str:
    """'**RoPE**: p 0.89 at 1×, 0.86 at 2×, 0.045 at 256×; the law fits within 14% (m_out 5.27); the prediction …'."""
    last = lengths[-1] // train_length if lengths[-1] % train_length == 0 else None
    multiples = (1, 2) if last is None else tuple(dict.fromkeys((1, 2, last)))
    parts = [f"p {accuracy_points(lengths, measured, train_length, multiples)}"]
    if fit.fit is not None:
        parts.append(f"the dilution law fits every point past training within {fit.fit.max_relative_error:.0%} "
                     f"(m_out {fit.fit.m_out:.2f})")
    elif fit.status in ("not_learned", "at_chance"):
        parts.append(f"no dilution law ({m_out_text(fit)})")
    if predicted is not None:
        gaps = [abs(p - m) for p, m in zip(predicted, measured, strict=True)]
        worst = int(np.argmax(gaps))
        if gaps[worst] <= PREDICTION_TOLERANCE:
            parts.append(f"the prediction from the weights is within {gaps[worst]:.2g} of it at every length")
        else:
            parts.append(f"the prediction from the weights does NOT track it: {share(predicted[worst])} against "
                         f"{share(measured[worst])} measured at {lengths[worst]:,}")
    return f"**{label}**: {'; '.join(parts)}."


def m_out_text(fit: FitResult) -> str:
    """'5.27 (5.22–5.32)' for a fitted law, else why there is none: 'not learned', 'at chance', …."""
    if fit.fit is not None:
        return f"{fit.fit.m_out:.2f} ({fit.fit.m_out_low:.2f}–{fit.fit.m_out_high:.2f})"
    return {"not_learned": "not learned", "at_chance": "at chance", "too_few_points": "too few lengths",
            "not_applicable": "n/a (transformer)"}.get(fit.status, fit.status)


def carrier_peak(values: Sequence[float], train_length: int, offset: int) -> tuple[int, float]:
    """(argmax Δ over the training range, margin of s(k) over every other offset there, in nats),
    as lengen_core.carrier measures them."""
    in_range = np.asarray(values[:train_length], dtype=np.float64)
    return int(np.argmax(in_range)), float(in_range[offset] - np.delete(in_range, offset).max())


def alignment_caption(label: str, values: Sequence[float], train_length: int, offset: int,
                      rope_softmax: bool, learned: bool | None) -> str:
    """'RoPE peaks at Δ = 3 = k, 2.8 nats above every other offset in range: aligned (C5)'."""
    argmax, margin = carrier_peak(values, train_length, offset)
    if argmax == offset and margin >= ALIGNMENT_MARGIN:
        text = f"{label} peaks at Δ = {offset} = k, {margin:.1f} nats above every other offset in range: aligned"
    elif argmax == offset:
        text = (f"{label} peaks at Δ = k = {offset} by only {margin:.2f} nats, under the {ALIGNMENT_MARGIN:g} nat "
                "that alignment needs: not aligned")
    else:
        text = f"{label} peaks at Δ = {argmax}, not at k = {offset}: not aligned"
    if learned is False:
        return f"{text} (it did not learn the task)"
    if rope_softmax:
        aligned = argmax == offset and margin >= ALIGNMENT_MARGIN
        return f"{text} (C5)" if aligned else f"{text}: this RoPE run's carrier is NOT aligned with k, as C5 says it is"
    return text


def toeplitz_caption(label: str, trained: float, baseline: float | None) -> str:
    """'RoPE 1.000 against 0.986 untrained (unchanged by training)' and what the change means."""
    if baseline is None:
        return f"{label} {trained:.3f} (no untrained baseline for a transformer head)"
    change = trained - baseline
    if abs(change) < TOEPLITZ_UNCHANGED:
        meaning = "unchanged by training: it shows equivariance, not a learned rule"
    elif change < 0:
        meaning = "training made its logits depend on absolute positions"
    else:
        meaning = "training made its logits more a function of t − u"
    return f"{label} {trained:.3f} against {baseline:.3f} untrained ({meaning})"


@dataclass(frozen=True)
class ArgmaxTrace:
    """Where the queries of one sequence attend most, read against j* = t − k and against pinning."""

    length: int
    train_length: int
    offset: int
    relative_in_range: float  # share of the queries k ≤ t < L_train whose argmax key is t − k
    last_key: int  # argmax key of the last query
    beyond: int  # queries t ≥ L_train
    relative_beyond: float | None  # share of those whose argmax key is t − k
    common_key: int | None  # their most common argmax key
    common_share: float | None

    @property
    def pinned(self) -> bool:
        """Most queries past training on one key inside it (lengen_core.heads's rule)."""
        return self.common_key is not None and self.common_key < self.train_length and self.common_share >= PIN_SHARE


def argmax_trace(argmax_keys: np.ndarray, train_length: int, offset: int) -> ArgmaxTrace:
    keys = np.asarray(argmax_keys)
    t = np.arange(len(keys))
    relative = keys == t - offset
    inside, past = (t >= offset) & (t < train_length), t >= train_length
    common = share_of = None
    if past.any():
        values, counts = np.unique(keys[past], return_counts=True)
        common, share_of = int(values[np.argmax(counts)]), float(counts.max() / past.sum())
    return ArgmaxTrace(len(keys), train_length, offset, float(relative[inside].mean()), int(keys[-1]),
                       int(past.sum()), float(relative[past].mean()) if past.any() else None, common, share_of)


def trace_caption(trace: ArgmaxTrace, expected: Literal["relative", "pinned"] | None, learned: bool | None,
                  last_query_only: bool = True) -> str:
    """What the argmax keys of this run show past the training length, and whether that is the claim's;
    `last_query_only`: the retrieval task scores the last query alone (the shift task every t ≥ k)."""
    L, k = trace.train_length, trace.offset
    inside = f"{_percent(trace.relative_in_range)} of the queries {k} ≤ t < {L} attend most to t − k"
    if last_query_only:
        target = trace.length - 1 - k
        where = "= t − k" if trace.last_key == target else f"(t − k = {target})"
        inside += f"; the last query, the only one the retrieval task scores, to key {trace.last_key} {where}"
    if trace.relative_beyond is None:
        return f"at the training length, {inside}.{_did_not_learn(learned)}"
    past = (f"past the training length (t ≥ {L}), {_percent(trace.relative_beyond)} of the {trace.beyond:,} queries "
            "attend most to t − k")
    if trace.pinned:
        past += (f" and {_percent(trace.common_share)} to key {trace.common_key}"
                 + (" = L_train − 1 − k" if trace.common_key == L - 1 - k else ""))
    else:
        past += f"; no one key takes more than {_percent(trace.common_share)} of them"
    if learned is False:
        claim = ""
    elif expected == "relative":
        claim = (": the slope-1 line of a relative rule (C3)" if trace.relative_beyond >= 0.5 else
                 ": this RoPE run does NOT follow t − k past its training length")
    elif expected == "pinned":
        claim = (": pinned inside the training range (C4)" if trace.pinned else
                 ": this learned-position run is NOT pinned past its training length")
    else:
        claim = (": it follows t − k" if trace.relative_beyond >= 0.5 else
                 f": pinned to key {trace.common_key}" if trace.pinned else ": neither a relative rule nor pinned")
    return f"{past}{claim}. Inside it, {inside}.{_did_not_learn(learned)}"


def weights_trace(weights: np.ndarray, train_length: int, offset: int) -> ArgmaxTrace:
    """The ArgmaxTrace of an attention matrix (queries × keys): each query's argmax key."""
    return argmax_trace(np.asarray(weights).argmax(axis=1), train_length, offset)


def trace_expectation(encoding: str, attention: str) -> Literal["relative", "pinned"] | None:
    """What the attention charts claim: RoPE with softmax follows t − k (C3), a learned table pins (C4)."""
    if attention == "softmax" and encoding == "rope":
        return "relative"
    return "pinned" if encoding == "learned" else None


def zoom_caption(last_key: int, target: int, weight_on_target: float | None, learned: bool | None) -> str:
    """The last query's argmax key against the circled target key t − k."""
    if last_key == target:
        text = f"the last query (bottom row) attends most to key {target} = t − k, the circled target"
    else:
        text = f"the last query (bottom row) attends most to key {last_key}, NOT to the circled target key {target}"
    if weight_on_target is not None:
        text += f"; weight {share(abs(weight_on_target))} on the target"
    return f"{text}; unpooled weights.{_did_not_learn(learned)}"


def _head_name(head: HeadReport) -> str:
    return f"L{head.layer}H{head.head}"


def head_grid_caption(heads: Sequence[HeadReport], encoding: str, learned: bool | None) -> str:
    """Which heads carry the offset and which pin, and whether that is what the encoding's claim says."""
    carriers = [_head_name(h) for h in heads if h.is_carrier]
    pinned = [f"{_head_name(h)} (key {h.pinned_key}, {_percent(h.pinned_share)})" for h in heads
              if h.pinned_key is not None]
    both = [_head_name(h) for h in heads if h.is_carrier and h.pinned_key is not None]
    text = (f"red panels are carrier heads, here {', '.join(carriers) or 'none'}; purple ones pinned heads "
            f"(most queries past training on one key inside it), here {', '.join(pinned) or 'none'}")
    if both:
        text += f"; {', '.join(both)} select k inside training and pin past it"
    if learned is False:
        return f"{text}.{_did_not_learn(learned)}"
    if encoding == "rope":
        return f"{text}: a head carries the offset (C8)." if carriers else f"{text}: this RoPE run has NO carrier head."
    if encoding == "learned":
        return f"{text}: the learned table pins (C4, C8)." if pinned else f"{text}: this learned-position run has NO pinned head."
    return f"{text}."


def heads_table_caption(heads: Sequence[HeadReport], offset: int) -> str:
    """What the table's columns show for this run's heads."""
    carriers = [f"{_head_name(h)} ({share(h.target_weight)} on the target)" for h in heads if h.is_carrier]
    others = [f"{_head_name(h)} at Δ = {h.argmax_offset}" for h in heads if h.argmax_offset != offset]
    low, high = min(h.toeplitz_fraction for h in heads), max(h.toeplitz_fraction for h in heads)
    text = (f"carrier heads have argmax_offset = k = {offset} and most of their weight on the target: "
            f"{', '.join(carriers) or 'none here'}")
    if others:
        text += f"; other heads peak elsewhere: {', '.join(others)}"
    return (f"{text}. Toeplitz fractions run from {low:.3f} to {high:.3f}: near 1 says a head's mean logit depends "
            "on t − u, not that it learned a rule. pinned_key is where most queries past training attend.")


def position_caption(positions: Sequence[int], accuracy: Sequence[float], length: int, train_length: int,
                     chance: float, samples: int, encoding: str, learned: bool | None) -> str:
    """At the longest length: accuracy inside training, just past it, and where it first drops below 0.5."""
    starts, values = np.asarray(positions), np.asarray(accuracy, dtype=np.float64)
    widths = np.diff(np.append(starts, length))  # positions per bin
    inside, past = starts < train_length, (starts >= train_length) & (starts < 2 * train_length)
    text = f"at L = {length:,}: {share(values[inside].mean())} on the positions inside training"
    if not past.any():
        return f"{text}.{_did_not_learn(learned)}"
    end = min(2 * train_length, length) - 1
    answers = int(samples * widths[past].sum())
    just_past = float(np.average(values[past], weights=widths[past]))
    low, _ = wilson_interval(round(just_past * answers), answers)
    below = first_length_below(list(starts[starts >= train_length]), list(values[starts >= train_length]), 0.5)
    text += (f", {share(just_past)} on positions {train_length}–{end} just past the dashed line; "
             + (f"below 0.5 from position {below:,}" if below is not None else f"never below 0.5 up to {length - 1:,}"))
    if learned is False:
        return f"{text}.{_did_not_learn(learned)}"
    if encoding == "rope":
        if just_past >= NEAR_ONE:
            return f"{text}: RoPE holds its accuracy past the training length (C8)."
        return f"{text}: this RoPE run does NOT hold its accuracy past the training length."
    if encoding == "learned":
        if low <= chance + CHANCE_TOLERANCE:
            return f"{text}: at chance ({share(chance)}) on the first positions it never trained (C4, C8)."
        return f"{text}: this learned-position run does NOT drop to chance ({share(chance)}) past its training length."
    return f"{text}."


def equivariance_caption(shifts: Sequence[int], differences: Sequence[float | None], logit_scale: float,
                         tolerance: float, encoding: str, learned: bool | None) -> str:
    """The largest |Δ logit| over the shifts, against the tolerance and the logits themselves."""
    measured = [(s, d) for s, d in zip(shifts, differences, strict=True) if s > 0 and d is not None]
    missing = [s for s, d in zip(shifts, differences, strict=True) if d is None]
    beyond = f" Shifts from {missing[0]:,} on leave the position table and are not drawn." if missing else ""
    if not measured:
        return f"no shift fits in the position table.{beyond}"
    above = [(s, d) for s, d in measured if d >= tolerance]
    if above:
        shift, difference = above[0]
        text = (f"the difference is already {difference:.2g} at the shift s = {shift:,} (the logits themselves reach "
                f"{logit_scale:.2g}): the logit depends on absolute positions")
    else:
        text = (f"the largest difference over shifts up to {measured[-1][0]:,} is {max(d for _, d in measured):.1e}, "
                f"under the tolerance {tolerance:g} (the logits themselves reach {logit_scale:.2g}): the logit "
                "depends on t − u alone")
    relative = encoding in RELATIVE_ENCODINGS
    if learned is False:
        claim = ". This run did not learn the task; the check reads its weights all the same."
    elif relative != bool(above):
        claim = " (C3)." if relative else f", as a {encoding} encoding's does."
    else:
        claim = f": this {encoding} run's logits do NOT depend on {'t − u alone' if relative else 'absolute positions'}."
    return f"{text}{claim}{beyond}"


def training_caption(steps: int, seconds: float, device: str, stopped_early: bool, train_accuracy: float,
                     verdict: Verdict | None, train_length: int) -> str:
    """The training, then what it does and does not tell: the verdict on fresh sequences."""
    end = ", stopped early at 100% batch accuracy" if stopped_early else f", final batch accuracy {share(train_accuracy)}"
    text = f"{steps:,} steps in {seconds:.1f} s on {device}{end}."
    if verdict is not None:
        text += f" {verdict_text(verdict, train_length)}"
    return text + " The batch accuracy is measured at the training length only: longer lengths are on Attention and Dilution."

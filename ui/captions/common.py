"""Captions computed from the run they describe: plain numbers in, a sentence out. No Streamlit.

A fixed sentence about a chart is a claim the next run may contradict; each caption states what
*this* run shows, from its own numbers, and says so plainly when the run contradicts the claim the
chart is about. This module holds what every caption shares: how a number reads, the verdict, where
an accuracy curve crosses a bar. The page captions build on it, one topic each:

- ui.captions.accuracy: accuracy against length and position, target mass, training;
- ui.captions.attention: where the queries attend (the argmax trace, the zoom);
- ui.captions.mechanism: carrier alignment, Toeplitz fractions, heads, equivariance.

Encodings a chart makes no claim about get the numbers only. Neither does a run whose verdict says it
did not learn: its captions say what it shows and that it did not learn.
"""

from __future__ import annotations

from collections.abc import Sequence

from lengen_core.analysis.verdict import CHANCE_TOLERANCE, Verdict
from lengen_core.thresholds import ACCURACY_BAR  # "near 1": learned, and the horizon's bar


def share(value: float) -> str:
    """An accuracy or a mass as people read it: 0.81, 0.062, 0.0003."""
    if value >= 0.095 or value == 0:
        return f"{value:.2f}"
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def percent(value: float) -> str:
    """0.84 → '84%'."""
    return f"{value:.0%}"


def verdict_text(verdict: Verdict, train_length: int, limit: str | None = None) -> str:
    """'Learned the task: accuracy 1.00 at the training length 16 (95% …); at chance past it: …'.
    `limit` says why the model cannot learn it (an encoding's single-head limit), for a run that did not."""
    interval = (f"(95% interval {verdict.in_range_low:.3f}–{verdict.in_range_high:.3f}, "
                f"{verdict.answers:,} fresh answers)")
    head = "Learned the task" if verdict.learned else "Did not learn the task"
    text = f"**{head}**: accuracy {share(verdict.in_range_accuracy)} at the training length {train_length} {interval}"
    if not verdict.learned:
        text += f", below the {ACCURACY_BAR:.2f} a learned task needs"
    if verdict.beyond_length is not None:
        where = "at chance" if verdict.at_chance_beyond else "above chance"
        text += (f"; {where} past it: {share(verdict.beyond_accuracy)} at length {verdict.beyond_length} "
                 f"(chance {share(verdict.chance)})")
    text += "."
    return f"{text} {limit}" if limit and not verdict.learned else text


def did_not_learn(learned: bool | None) -> str:
    """The sentence a caption ends on for a run whose verdict says it did not learn (else nothing)."""
    return " This run did not learn the task, so it tests no claim." if learned is False else ""


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


def horizon(lengths: Sequence[int], accuracies: Sequence[float], threshold: float = ACCURACY_BAR) -> int | None:
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

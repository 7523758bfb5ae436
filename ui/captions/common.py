"""Captions computed from the run they describe: plain numbers in, a sentence out. No Streamlit.

A fixed sentence about a chart is a claim the next run may contradict; each caption states what
*this* run shows, from its own numbers, and says so plainly when the run contradicts the claim the
chart is about. This module holds what every caption shares: how a number reads, the verdict, where
an accuracy curve crosses a bar. The page captions build on it, one topic each:

- ui.captions.accuracy: accuracy against length and position, target mass, training;
- ui.captions.attention: where the queries attend (the argmax trace, the zoom);
- ui.captions.mechanism: carrier alignment, Toeplitz fractions, heads, equivariance;
- ui.captions.regime: the one dilution verdict every caption of a page reads (is there dilution?).

A caption that runs long is a `Caption`: its lead (at most LEAD_SENTENCES sentences, at most LEAD_CHARS
characters, from the run's own numbers) goes under the chart, the rest into an expander. A claim a caption
invokes is named with its words (lengen_core.claims: `claims_note`, `claim_words`).

Encodings a chart makes no claim about get the numbers only. Neither does a run whose verdict says it
did not learn: its captions say what it shows and that it did not learn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Self

from lengen_core.analysis.horizon import Horizon, measured_horizon
from lengen_core.analysis.verdict import CHANCE_TOLERANCE, Verdict
from lengen_core.claims import claim_words
from lengen_core.thresholds import ACCURACY_BAR, ACCURACY_STEP  # "near 1": learned, and the horizon's bar; a step

LEAD_SENTENCES = 2  # a caption's lead: what a person reads under a chart before deciding to read more
LEAD_CHARS = 400


class Caption(str):
    """A caption's whole text (`lead`, then `more`), which knows its lead: the page writes the lead under its
    chart and `more` in an expander. Being a str, it goes wherever a caption's text went before (a lesson's
    projector caption folds it by length)."""

    lead: str
    more: str

    def __new__(cls, lead: str, more: str = "") -> Self:
        text = super().__new__(cls, f"{lead} {more}".strip())
        text.lead, text.more = lead.strip(), more.strip()
        return text


LISTED_IN_LEAD = 4  # runs a lead names one by one; the others are counted, and each is in the rest


def listed(items: Sequence[str]) -> str:
    """'a, b and c', or the first LISTED_IN_LEAD and 'N more'."""
    shown = list(items[:LISTED_IN_LEAD]) + ([f"{len(items) - LISTED_IN_LEAD} more"] if len(items) > LISTED_IN_LEAD else [])
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*])")


def split_lead(text: str, sentences: int = 1) -> Caption:
    """`text` as a Caption whose lead is its first `sentences` sentences (a sentence ends at '.', '!' or '?'
    before a capital)."""
    parts = _SENTENCE_END.split(text.strip(), maxsplit=sentences)
    return Caption(" ".join(parts[:sentences]), " ".join(parts[sentences:]))


def sentence_count(text: str) -> int:
    """How many sentences `text` holds, by `split_lead`'s rule."""
    return len(_SENTENCE_END.split(text.strip())) if text.strip() else 0


def claims_note(codes: Sequence[str]) -> str:
    """'The claims: C1 (RoPE extrapolates …); C6 (accuracy decays …)' for the claims a caption invoked, each once."""
    named = [claim_words(code) for code in dict.fromkeys(codes)]
    return f"The claim{'s' * (len(named) > 1)}: {'; '.join(named)}." if named else ""


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
    """The first measured length whose accuracy is below `threshold` (None: it never falls that low). A NaN
    accuracy counts as below, as in the measured horizon: it is not shown to hold."""
    return next((n for n, a in zip(lengths, accuracies, strict=True) if not a >= threshold), None)


def horizon(lengths: Sequence[int], accuracies: Sequence[float], train_length: int,
            measured: Horizon | None = None) -> Horizon | None:
    """The run's measured horizon: `measured` (a Measurement's `measured_horizon`) where the caller has it, else
    the same rule on these numbers (lengen_core.analysis.horizon.measured_horizon, the one a Measurement uses),
    never a rule of the captions' own. None: no length at or past the training length measured."""
    return measured if measured is not None else measured_horizon(lengths, accuracies, train_length)


def horizon_length(lengths: Sequence[int], accuracies: Sequence[float], train_length: int,
                   measured: Horizon | None = None) -> int | None:
    """The largest measured length up to which accuracy stays ≥ ACCURACY_BAR (`horizon`); None where it is below
    already at the training length or none was measured there."""
    found = horizon(lengths, accuracies, train_length, measured)
    return None if found is None else found.length


def chance_from(lengths: Sequence[int], lows: Sequence[float], chance: float, after: int) -> int | None:
    """The first length past `after` from which every measured accuracy is at chance: its 95% interval's
    lower end within the verdict's CHANCE_TOLERANCE of chance (the verdict's own rule)."""
    start = None
    for length, low in zip(lengths, lows, strict=True):
        if length <= after:
            continue
        start = (start or length) if low <= chance + CHANCE_TOLERANCE else None
    return start


def times(length: int, train_length: int) -> str:
    """64 → '4×' for L_train 16; 112 → '2.8×' for L_train 40."""
    return f"{length // train_length}×" if length % train_length == 0 else f"{length / train_length:.1f}×"


def steps(lengths: Sequence[int], accuracies: Sequence[float], size: float = ACCURACY_STEP) -> list[tuple[int, int, float, float]]:
    """(length before, length after, accuracy before, accuracy after) for each pair of neighbouring measured
    lengths (in increasing order) whose accuracies differ by more than `size` (ACCURACY_STEP)."""
    pairs = sorted(zip(lengths, accuracies, strict=True))
    return [(n, m, float(a), float(b)) for (n, a), (m, b) in pairwise(pairs) if abs(b - a) > size]


def recurrence_between(before: int, after: int, recurrences: Sequence | None, searched_to: int | None):
    """What the carrier's near-recurrences (lengen_core.analysis.carrier.find_near_recurrences: offsets Δ with
    `offset` and `gap`) say of the keys that enter between lengths `before` and `after`, offsets before …
    after − 1: the one with the smallest gap there and how many are listed there; (None, 0) where none is
    listed although the search covered those offsets (`searched_to`); None where it did not (or no search)."""
    if recurrences is None or searched_to is None:
        return None
    inside = [r for r in recurrences if before <= r.offset < after]
    if inside:
        return min(inside, key=lambda r: (r.gap, r.offset)), len(inside)
    return (None, 0) if after <= searched_to else None


def step_text(step: tuple[int, int, float, float], train_length: int, recurrences: Sequence | None = None,
              searched_to: int | None = None) -> str:
    """'from 0.96 at 112 (2.8×) to 0.85 at 113 (2.8×), a step of 0.11, where a near-recurrence of the carrier
    enters at Δ = 112 (its logit 0.40 nats below the target's)'."""
    before, after, a, b = step
    text = (f"from {share(a)} at {before:,} ({times(before, train_length)}) to {share(b)} at {after:,} "
            f"({times(after, train_length)}), a step of {abs(b - a):.2f}")
    found = recurrence_between(before, after, recurrences, searched_to)
    if found is None:
        return text
    nearest, count = found
    if nearest is None:
        return text + f", with no near-recurrence of the carrier at Δ = {before:,}–{after - 1:,}"
    side = f"{abs(nearest.gap):.2f} nats {'below' if nearest.gap >= 0 else 'above'} the target's"
    more = "" if count == 1 else f"; the strongest of {count} listed at Δ = {before:,}–{after - 1:,}"
    return text + f", where a near-recurrence of the carrier enters at Δ = {nearest.offset:,} (its logit {side}{more})"


def leaves_and_chance(lengths: Sequence[int], accuracies: Sequence[float], lows: Sequence[float], chance: float,
                      train_length: int) -> tuple[int | None, int | None]:
    """Over every measured length past training: the first where accuracy is below ACCURACY_BAR (it leaves
    near 1) and the first from which it is at chance on (`chance_from`, the verdict's interval rule)."""
    past = [(n, a) for n, a in zip(lengths, accuracies, strict=True) if n > train_length]
    leaves = first_length_below([n for n, _ in past], [a for _, a in past], ACCURACY_BAR)
    return leaves, chance_from(lengths, lows, chance, train_length)


def extrapolation_text(lengths: Sequence[int], accuracies: Sequence[float], lows: Sequence[float], chance: float,
                       train_length: int, top: int, claim: str = "C1", named: bool = True) -> str:
    """C1 judged over every measured length past training, for a run still near 1 just past it (`top`, its
    horizon, is past L_train): where it leaves ACCURACY_BAR (`named`: said here; else the caller said it) and
    where it reaches chance (`leaves_and_chance`). 'It stays near 1 at every length measured' only where it
    does so at every length measured."""
    L, last = train_length, lengths[-1]
    leaves, gone = leaves_and_chance(lengths, accuracies, lows, chance, L)
    if leaves is None:
        return f"It stays near 1 at every length measured past its training length, up to {last:,} ({times(last, L)}) ({claim})."
    held = f"It holds ≥ {ACCURACY_BAR:.2f} up to {top:,} ({times(top, L)}) and leaves it at {leaves:,} ({times(leaves, L)})"
    if gone is None:
        still = f"{held}, still above chance" if named else "It is still above chance"
        return f"{still} at {last:,} ({times(last, L)}): it extrapolates up to {times(top, L)} here ({claim})."
    at_chance = f"{held}; from {gone:,} ({times(gone, L)}) on it is at chance" if named else \
        f"From {gone:,} ({times(gone, L)}) on it is at chance"
    return f"{at_chance}: this run extrapolates up to {times(top, L)} only, NOT to every length measured ({claim})."

"""Captions for accuracy against length (Start, Compare, Transformer), target mass (Compare), accuracy by
position (Transformer) and training (Train), each computed from the run's own numbers. No Streamlit.

The accuracy charts claim (docs/science.md §1): RoPE with softmax attention stays near 1 past its
training length (C1); a learned table (C1) and linear attention (C7) fall to chance there. What each
run is expected to show comes from lengen_core.claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lengen_core.analysis.evaluate import wilson_interval
from lengen_core.analysis.fit import LAW_TOLERANCE, DilutionFit, FitResult
from lengen_core.analysis.trust import mass_miss
from lengen_core.analysis.verdict import CHANCE_TOLERANCE, Verdict
from lengen_core.claims import expectation
from lengen_core.config import RunConfig
from lengen_core.thresholds import ACCURACY_BAR, ACCURACY_HALF, PREDICTION_BOUND
from ui.captions.common import (
    Caption,
    accuracy_points,
    chance_from,
    claims_note,
    did_not_learn,
    extrapolation_text,
    first_length_below,
    horizon_length,
    listed,
    share,
    times,
    verdict_text,
)

_times = times  # 64 → '4×' for L_train 16


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
    claim = expectation(config.model.encoding, config.model.attention).accuracy_claim
    return Curve(label, config.model.encoding, config.model.attention, config.task.train_length,
                 1 / config.task.vocab_size, tuple(lengths), tuple(accuracy), tuple(accuracy_low),
                 None if verdict is None else verdict.learned, claim + (", C8" if not config.model.minimal else ""),
                 every_position)


PastVerdict = Literal["holds", "chance", "between"]


def past_verdict(curve: Curve) -> PastVerdict | None:
    """The one answer to "does it hold past training?" that every caption of a page reads for this curve:
    "holds" where its horizon (ACCURACY_BAR) lies past the training length, "chance" where it is at chance
    (the verdict's interval rule, `chance_from`) from the first length past training on, "between" else;
    None with no length past training measured."""
    L = curve.train_length
    if not any(n > L for n in curve.lengths):
        return None
    top = horizon_length(curve.lengths, curve.accuracy, curve.train_length)
    if top is not None and top > L:
        return "holds"
    first = next(n for n in curve.lengths if n > L)
    return "chance" if chance_from(curve.lengths, curve.accuracy_low, curve.chance, L) == first else "between"


def _short(curve: Curve) -> str:
    """One clause of a curves caption's lead: '**RoPE** ≥ 0.90 up to 2,048 (128×) (C1)', '… contrary to C1'."""
    L, name = curve.train_length, f"**{curve.label}**"
    if curve.learned is False:
        return f"{name} did not learn the task (no claim)"
    verdict = past_verdict(curve)
    if verdict is None:
        return f"{name} was not measured past its training length"
    top = horizon_length(curve.lengths, curve.accuracy, curve.train_length)
    first = next(n for n in curve.lengths if n > L)
    fact = {"holds": lambda: f"≥ {ACCURACY_BAR:.2f} up to {top:,} ({_times(top, L)})",
            "chance": lambda: f"at chance from {first:,} ({_times(first, L)}) on",
            "between": lambda: (f"{share(dict(zip(curve.lengths, curve.accuracy, strict=True))[first])} at {first:,} "
                                f"({_times(first, L)}), neither near 1 nor at chance")}[verdict]()
    expected = expectation(curve.encoding, curve.attention).accuracy
    if expected is None or curve.every_position:
        return f"{name} {fact}"
    agrees = verdict == ("holds" if expected == "extrapolates" else "chance")
    return f"{name} {fact} ({curve.claim})" if agrees else f"{name} {fact}, contrary to {curve.claim}"


def curve_caption(curve: Curve, multiples: Sequence[int] = (1, 2, 4)) -> Caption:
    """'**RoPE**: 1.00 at 1×, …; ≥ 0.90 up to 64 (4×), at chance from 2,048 (128×) on. It stays near 1 …' as the
    lead (the numbers, then the claim's sentence), the claim's words as the rest. Whether it holds past
    training is `past_verdict`, the answer the page's other captions read."""
    L, name = curve.train_length, f"**{curve.label}**"
    points = accuracy_points(curve.lengths, curve.accuracy, L, multiples)
    top = horizon_length(curve.lengths, curve.accuracy, curve.train_length)
    floor = chance_from(curve.lengths, curve.accuracy_low, curve.chance, L)
    half = first_length_below(curve.lengths, curve.accuracy, ACCURACY_HALF)
    facts = [f"≥ {ACCURACY_BAR:.2f} up to {top:,} ({_times(top, L)})"] if top is not None else []
    if half is not None and half != floor:
        facts.append(f"below {ACCURACY_HALF:g} from {half:,} ({_times(half, L)})")
    facts.append(f"at chance from {floor:,} ({_times(floor, L)}) on" if floor is not None
                 else f"above chance up to {curve.lengths[-1]:,}")
    numbers = f"{points}; {', '.join(facts)}"
    if curve.learned is False:
        return Caption(f"{name} did not learn the task (a learned task needs ≥ {ACCURACY_BAR:.2f} at 1×), so it tests "
                       f"no claim: {numbers}.")
    past = [(n, a, low) for n, a, low in zip(curve.lengths, curve.accuracy, curve.accuracy_low, strict=True) if n > L]
    expected, claim = expectation(curve.encoding, curve.attention).accuracy, curve.claim
    if curve.every_position:
        return Caption(f"{name}: {numbers}.", "Over every position t ≥ k, those inside training included; the "
                                              "Transformer page scores the positions past training alone.")
    if expected is None or not past:
        return Caption(f"{name}: {numbers}.")
    length, accuracy, low = past[0]
    kind = expectation(curve.encoding, curve.attention).name  # how the caption names a run it contradicts
    verdict = past_verdict(curve)
    if expected == "extrapolates":
        sentence = (_extrapolation(curve, top) if verdict == "holds" else
                    f"This {kind} run does NOT stay near 1 past its training length: {share(accuracy)} at "
                    f"{length:,} ({_times(length, L)}), contrary to {claim}.")
    elif verdict == "chance":
        sentence = f"It falls to chance at the first length past training ({claim})."
    else:
        sentence = (f"This {kind} run does NOT fall to chance past its training length, contrary to {claim}: "
                    f"{share(accuracy)} at {length:,} ({_times(length, L)}), 95% interval from {share(low)}, "
                    f"against chance {share(curve.chance)}.")
    return Caption(f"{name}: {numbers}. {sentence}", claims_note(_codes(claim)))


def _codes(claim: str) -> list[str]:
    """'C1, C8' → ['C1', 'C8']."""
    return [code.strip() for code in claim.split(",")]


def _extrapolation(curve: Curve, top: int) -> str:
    """C1 judged over every measured length past training (`extrapolation_text`)."""
    return extrapolation_text(curve.lengths, curve.accuracy, curve.accuracy_low, curve.chance, curve.train_length,
                              top, curve.claim)


def curves_caption(curves: Sequence[Curve], multiples: Sequence[int] = (1, 2, 4), note: str = "") -> Caption:
    """One clause per run as the lead (`_short`: past training, with its claim), then each run's full
    sentence, chance (and `note`, e.g. what the bands are) and the claims' words."""
    chance = min(c.chance for c in curves)
    lead = "Past the training length: " + "; ".join(_short(c) for c in curves) + "."
    codes = [code for c in curves if c.learned is not False and not c.every_position
             and expectation(c.encoding, c.attention).accuracy is not None for code in _codes(c.claim)]
    rest = [*(curve_caption(c, multiples).lead for c in curves), f"Chance 1/V = {share(chance)}.", note,
            claims_note(codes)]
    return Caption(lead, " ".join(part for part in rest if part))


def mass_caption(label: str, lengths: Sequence[int], measured: Sequence[float], predicted: Sequence[float] | None,
                 fit: FitResult, train_length: int, sems: Sequence[float] | None = None) -> str:
    """'**RoPE**: p 0.89 at 1×, 0.86 at 2×, 0.045 at 256×; the law (which K) fits every point it is drawn at within
    8% (m_out 5.27); the plain law …; the prediction …'. The prediction tracks p by the trust verdict's rule
    (lengen_core.analysis.trust.mass_miss): within PREDICTION_BOUND beyond two standard errors `sems` of the
    measured p (without them: within PREDICTION_BOUND of it)."""
    last = lengths[-1] // train_length if lengths[-1] % train_length == 0 else None
    multiples = (1, 2) if last is None else tuple(dict.fromkeys((1, 2, last)))
    parts = [f"p {accuracy_points(lengths, measured, train_length, multiples)}"]
    if fit.fit is not None:
        parts.append(law_sentence(fit.fit, lengths, train_length))
    elif fit.status in ("not_learned", "at_chance", "no_dilution", "not_monotone"):
        parts.append(f"no dilution law ({m_out_text(fit)})")
    if predicted is not None:
        misses = [mass_miss(p, m, s) for p, m, s in zip(predicted, measured, sems or [0.0] * len(measured), strict=True)]
        worst = int(np.argmax(misses))
        gap = max(abs(p - m) for p, m in zip(predicted, measured, strict=True))
        if misses[worst] <= PREDICTION_BOUND:
            band = f" (at most {PREDICTION_BOUND:g} beyond two standard errors)" if gap > PREDICTION_BOUND else ""
            parts.append(f"the prediction from the weights is within {gap:.2g} of it at every length{band}")
        else:
            parts.append(f"the prediction from the weights does NOT track it: {share(predicted[worst])} against "
                         f"{share(measured[worst])} measured at {lengths[worst]:,}")
    return f"**{label}**: {'; '.join(parts)}."


def law_sentence(law: DilutionFit, lengths: Sequence[int], train_length: int) -> str:
    """Whether the law fits, judged over every measured point it is drawn at (L_train … its longest fitted
    length), which K(n) it counts, and the plain two-zone law's error beside a weighted one."""
    span = f"every point from {train_length:,} to {law.longest:,}"
    beyond = [n for n in lengths if n > law.longest]
    counted = "far keys counted by their weight" if law.weighted else "K = n − L_train"
    if law.holds:
        text = (f"the dilution law ({counted}) fits {span} within {law.max_relative_error:.0%} "
                f"(m_out {law.m_out:.2f})")
    else:
        text = (f"the dilution law ({counted}) does NOT describe it within {LAW_TOLERANCE:.0%}: it misses by "
                f"{law.max_relative_error:.0%} at {law.worst_length:,} (m_out {law.m_out:.2f})")
    if law.plain is not None:
        plain = law.plain
        text += (f"; the plain law (K = n − L_train) {'fits' if plain.holds else 'misses'} "
                 f"{'within' if plain.holds else 'by'} {plain.max_relative_error:.0%} (m_out {plain.m_out:.2f})")
    if beyond:
        text += f"; past {law.longest:,}, where p ≤ 2/V, the law is not drawn"
    return text


NO_LAW_TEXT = {"not_learned": "not learned", "at_chance": "at chance", "too_few_points": "too few lengths",
               "not_applicable": "n/a (transformer)", "no_dilution": "p does not fall",
               "not_monotone": "p not monotone"}


def m_out_text(fit: FitResult, samples: int | None = None, answers: bool = True) -> str:
    """'5.27 (5.22–5.32)' for a fitted law ('…; law off by 14%' past LAW_TOLERANCE), else why there is
    none: 'not learned', 'at chance', 'p does not fall', …. The interval is the one to quote, over the answers
    and the lengths fitted, with the answers' alone beside it where it is narrower: '7.52 (7.17–7.85; answers
    alone 7.49–7.56)'. With `samples`, what the figure came from, so two figures for one run that differ say
    why: '5.27 (5.22–5.32), fitted 16–256 (5 lengths), 256 samples'. `answers` False leaves the answers'
    interval out (a narrow table cell; the page's caption gives it)."""
    if fit.fit is not None:
        law = fit.fit
        text = f"{law.m_out:.2f} ({law.quoted_low:.2f}–{law.quoted_high:.2f}"
        if answers and f"{law.quoted_low:.2f}–{law.quoted_high:.2f}" != f"{law.m_out_low:.2f}–{law.m_out_high:.2f}":
            text += f"; answers alone {law.m_out_low:.2f}–{law.m_out_high:.2f}"
        text += ")"
        if samples is not None:
            text += f", fitted {law.train_length:,}–{law.longest:,} ({law.points} lengths), {samples:,} samples"
        return text + ("" if law.holds else f"; law off by {law.max_relative_error:.0%}")
    return NO_LAW_TEXT.get(fit.status, fit.status)


def position_caption(positions: Sequence[int], accuracy: Sequence[float], length: int, train_length: int,
                     chance: float, samples: int, encoding: str, attention: str, learned: bool | None,
                     past: PastVerdict | None = None) -> str:
    """At the longest length: accuracy inside training, just past it, and where it first drops below ACCURACY_HALF.
    Whether it holds past training (C8) is `past`, the page's one answer (`past_verdict` of its accuracy-by-length
    curve), where given; else this chart's own positions just past training say."""
    starts, values = np.asarray(positions), np.asarray(accuracy, dtype=np.float64)
    widths = np.diff(np.append(starts, length))  # positions per bin
    inside, just = starts < train_length, (starts >= train_length) & (starts < 2 * train_length)
    text = f"at L = {length:,}: {share(values[inside].mean())} on the positions inside training"
    if not just.any():
        return f"{text}.{did_not_learn(learned)}"
    end = min(2 * train_length, length) - 1
    answers = int(samples * widths[just].sum())
    just_past = float(np.average(values[just], weights=widths[just]))
    low, _ = wilson_interval(round(just_past * answers), answers)
    below = first_length_below(list(starts[starts >= train_length]), list(values[starts >= train_length]), ACCURACY_HALF)
    text += (f", {share(just_past)} on positions {train_length}–{end} just past the dashed line; "
             + (f"below {ACCURACY_HALF:g} from position {below:,}" if below is not None
                else f"never below {ACCURACY_HALF:g} up to {length - 1:,}"))
    if learned is False:
        return f"{text}.{did_not_learn(learned)}"
    if past is None:
        past = "holds" if just_past >= ACCURACY_BAR else "chance" if low <= chance + CHANCE_TOLERANCE else "between"
    expected = expectation(encoding, attention)
    if expected.heads == "carries":
        if past == "holds":
            return f"{text}: RoPE holds its accuracy past the training length ({expected.heads_claim})."
        return (f"{text}: this RoPE run does NOT hold its accuracy past the training length, contrary to "
                f"{expected.heads_claim}.")
    if expected.heads == "pins":
        if past == "chance":
            return f"{text}: at chance ({share(chance)}) on the first positions it never trained ({expected.heads_claim})."
        return (f"{text}: this learned-position run does NOT drop to chance ({share(chance)}) past its training "
                f"length, contrary to {expected.heads_claim}.")
    return f"{text}."


def training_caption(steps: int, seconds: float, device: str, stopped_early: bool, train_accuracy: float,
                     verdict: Verdict | None, train_length: int) -> str:
    """The training, then what it does and does not tell: the verdict on fresh sequences."""
    end = ", stopped early at 100% batch accuracy" if stopped_early else f", final batch accuracy {share(train_accuracy)}"
    text = f"{steps:,} steps in {seconds:.1f} s on {device}{end}."
    if verdict is not None:
        text += f" {verdict_text(verdict, train_length)}"
    return text + " The batch accuracy is measured at the training length only: longer lengths are on Attention and Dilution."


def masses_caption(runs: Sequence[tuple[str, Sequence[int], Sequence[float]]], rest: Sequence[str]) -> Caption:
    """Compare's target-mass chart: the lead gives each run's p at its longest measured length (label, lengths, p);
    `rest` (each run's `mass_caption`) follows in the expander."""
    ends = [f"{label} {share(p[-1])} at {lengths[-1]:,}" for label, lengths, p in runs]
    return Caption(f"Target mass p at the longest length measured: {listed(ends)}.", " ".join(rest))

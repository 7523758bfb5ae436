"""Captions of the Dilution and Carrier pages, computed from the run's own numbers. No Streamlit.

Each function returns the "what to look for" sentence of one chart: what this run shows, and, when
the run contradicts the claim the chart is about, a sentence that says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from lengen_core.analysis.carrier import (
    ACTIVE_AMPLITUDE,
    ALIGNMENT_MARGIN,
    BaselineRange,
    CarrierMetrics,
    NearRecurrence,
)
from lengen_core.analysis.evaluate import LengthError, check_lengths, wilson_interval
from lengen_core.analysis.fit import FLOOR_TIMES_CHANCE, FitResult
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.verdict import CHANCE_TOLERANCE, Verdict
from lengen_core.claims import expectation
from lengen_core.config import RunConfig
from lengen_core.thresholds import ACCURACY_BAR, ACCURACY_STEP
from ui.captions.common import (
    Caption,
    accuracy_points,
    claims_note,
    extrapolation_text,
    horizon,
    horizon_length,
    share,
    split_lead,
    step_text,
    steps,
    times,
)
from ui.captions.regime import DilutionRegime, dilution_regime

if TYPE_CHECKING:  # a type only: the caller has the run's model loaded
    import torch


UNKNOWN_REGIME = DilutionRegime(None, "")  # no law fitted to read a verdict from


def _horizon(lengths: Sequence[int], accuracies: Sequence[float], train_length: int,
             measured: Horizon | None = None) -> str:
    """'stays ≥ 0.9 up to L = 64 (4×), below it from 128' or 'falls below 0.9 already at L = 32 (2×…)': the
    measured horizon (`measured`, the Measurement's, else the same rule on these numbers: common.horizon)."""
    found = horizon(lengths, accuracies, train_length, measured)
    if found is None:
        return f"was not measured at or past the training length {train_length}"
    if found.below is None:
        return f"stays ≥ {ACCURACY_BAR} at every length measured, up to {found.ceiling:,}"
    if found.length is None or found.length <= train_length:
        return (f"falls below {ACCURACY_BAR} already at L = {found.below:,} ({found.below / train_length:g}× the "
                "training length)")
    return (f"stays ≥ {ACCURACY_BAR} up to L = {found.length:,} ({found.length / train_length:g}×), below it from "
            f"{found.below:,}")


def dilution_caption(encoding: str, attention: str, lengths: Sequence[int], accuracies: Sequence[float],
                     predicted: Sequence[float], train_length: int, verdict: Verdict | None,
                     accuracy_low: Sequence[float] | None = None, target_mass: Sequence[float] | None = None,
                     vote_accuracy: Sequence[float | None] | None = None, samples: int | None = None,
                     recurrences: Sequence[NearRecurrence] | None = None, searched_to: int | None = None,
                     fit: FitResult | None = None, measured: Horizon | None = None) -> Caption:
    """Accuracy against length. The lead: the run's points and measured horizon (`measured`: the Measurement's
    `measured_horizon`; without it, the same rule on these numbers), then whether it bears out C1 (RoPE with
    softmax extrapolates; a learned table, linear attention (C7) do not), as lengen_core.claims says for its
    encoding and attention, no claim for the other encodings. The rest: the prediction's largest miss, C6,
    which one limits, and the claims' words.

    C1 is judged over every measured length past training (`accuracy_low`: where it reaches chance, by the
    verdict's interval rule); each step of accuracy larger than ACCURACY_STEP between neighbouring lengths is
    named, with the carrier's near-recurrence between them where one is listed (`recurrences`, searched up to
    `searched_to`), and a run with such a step is not said to decay gracefully (C6). With the ideal vote
    readout's accuracy (`vote_accuracy`, on the same sequences, `samples` each) and `target_mass`, a sentence
    says whether the readout or the attention limits (`readout_text`), dilution or not as the law `fit` to
    the run says (ui.captions.regime: the verdict the 1/p caption reads too)."""
    chance = verdict.chance if verdict is not None else None
    points = accuracy_points(lengths, accuracies, train_length)
    head = (f"This run: {points}" + (f" (chance {share(chance)})" if chance is not None else "")
            + f"; it {_horizon(lengths, accuracies, train_length, measured)}.")
    gaps = np.abs(np.asarray(predicted) - np.asarray(accuracies))
    worst = int(np.argmax(gaps))
    more = [(f"The dashed prediction, from the weights alone, is within {gaps[worst]:.2f} of the measured "
             f"accuracy at every length (largest gap at L = {lengths[worst]:,}).")]
    claims = []
    if verdict is not None and not verdict.learned:
        claim = _partial_learner(verdict, lengths, accuracies, train_length)
    else:
        claim, decay, claims = _claim(encoding, attention, lengths, accuracies, accuracy_low, chance, train_length,
                                      recurrences, searched_to, measured)
        more.append(decay)
    if vote_accuracy is not None and target_mass is not None and samples is not None and chance is not None:
        more.append(readout_text(lengths, accuracies, vote_accuracy, target_mass, samples, chance, train_length,
                                 dilution_regime(fit)))
    more.append(claims_note(claims))
    return Caption(f"{head} {claim}", " ".join(part for part in more if part))


def _claim(encoding: str, attention: str, lengths: Sequence[int], accuracies: Sequence[float],
           lows: Sequence[float] | None, chance: float | None, train_length: int,
           recurrences: Sequence[NearRecurrence] | None, searched_to: int | None,
           measured: Horizon | None = None) -> tuple[str, str, list[str]]:
    """For a run that learned: the accuracy claim's sentence (the lead's), C6's (the rest's, '' where the run
    is not expected to extrapolate) and the claims named."""
    beyond = [a for n, a in zip(lengths, accuracies, strict=True) if n >= 2 * train_length]
    holds_at_2x = bool(beyond) and beyond[0] >= ACCURACY_BAR
    expected = expectation(encoding, attention)
    code = expected.accuracy_claim
    if expected.accuracy == "extrapolates":
        c1, c6 = _extrapolates(lengths, accuracies, lows, chance, train_length, recurrences, searched_to, measured)
        return c1, c6, [code, "C6"] if c6 else [code]
    if expected.accuracy is None:  # ALiBi, sinusoidal or no positions with softmax: the lab claims nothing
        return (f"No claim covers {encoding} with {attention} attention: this run "
                + (f"still holds {ACCURACY_BAR} at twice its training length." if holds_at_2x else
                   "does not extrapolate.")), "", []
    if holds_at_2x:
        return (f"This run contradicts {code}: unlike the claim for {encoding} with {attention} attention, it "
                f"still holds {ACCURACY_BAR} at twice its training length."), "", [code]
    return f"As {code} says for {encoding} with {attention} attention, it does not extrapolate.", "", [code]


def _extrapolates(lengths: Sequence[int], accuracies: Sequence[float], lows: Sequence[float] | None,
                  chance: float | None, train_length: int, recurrences: Sequence[NearRecurrence] | None,
                  searched_to: int | None, measured: Horizon | None = None) -> tuple[str, str]:
    """C1 over every length past training, then C6: graceful only without a step; each step named."""
    L = train_length
    past = [(n, a) for n, a in zip(lengths, accuracies, strict=True) if n > L]
    top = horizon_length(lengths, accuracies, L, measured)
    if not past or top is None or top <= L:
        where = f" at {past[0][0]:,} ({times(past[0][0], L)})" if past else ""
        return (f"This RoPE run contradicts C1: it is already below {ACCURACY_BAR} past its training "
                f"length{where}."), ""
    if lows is None or chance is None:  # no interval to tell chance by: the horizon alone
        c1 = f"RoPE keeps its rule past the training length up to {top:,} ({times(top, L)}) (C1)."
    else:
        c1 = extrapolation_text(lengths, accuracies, lows, chance, L, top, named=False)  # `_horizon` named it
    found = [s for s in steps(lengths, accuracies) if s[0] >= L]
    if not found:
        return c1, (f"Past it, accuracy changes by at most {ACCURACY_STEP} between neighbouring lengths measured: "
                    "a gradual decay, as C6 says.")
    named = "; ".join(step_text(s, L, recurrences, searched_to) for s in found)
    return c1, f"Its decay is NOT gradual, contrary to C6: accuracy steps by more than {ACCURACY_STEP} {named}."


def readout_text(lengths: Sequence[int], accuracies: Sequence[float], vote_accuracy: Sequence[float | None],
                 target_mass: Sequence[float], samples: int, chance: float, train_length: int,
                 regime: DilutionRegime = UNKNOWN_REGIME) -> str:
    """Which one limits past training, the model's readout or its attention, from the ideal vote readout's
    accuracy on the same sequences (the most attended token answers). Readout-limited: p > 2/V
    (FLOOR_TIMES_CHANCE/V, where the target's own weight outweighs twice a token's share) and the model at
    chance (the verdict's interval rule) while the vote readout's 95% interval lies above the model's; ''
    where the vote readout was not measured (numbers stored before it was). Where the attention limits, it
    is called dilution only as the run's `regime` says (ui.captions.regime), the verdict the 1/p caption reads."""
    rows = [(n, a, v, p) for n, a, v, p in zip(lengths, accuracies, vote_accuracy, target_mass, strict=True)
            if n > train_length and v is not None and not (isinstance(v, float) and np.isnan(v))]
    if not rows:
        return ""
    floor = FLOOR_TIMES_CHANCE * chance
    interval = [(n, a, v, p, wilson_interval(round(a * samples), samples), wilson_interval(round(v * samples), samples))
                for n, a, v, p in rows]
    limited = [(n, a, v, p) for n, a, v, p, (a_low, a_high), (v_low, _) in interval
               if p > floor and a_low <= chance + CHANCE_TOLERANCE and v_low > a_high]
    if limited:
        n, a, v, p = limited[0]
        others = f" (and at {len(limited) - 1} longer length{'s' * (len(limited) > 2)})" if len(limited) > 1 else ""
        return (f"Readout-limited at {n:,} ({times(n, train_length)}){others}: p = {share(p)} is above 2/V = "
                f"{share(floor)}, yet the model's accuracy {share(a)} is at chance, while the ideal vote readout "
                f"(the most attended token answers) scores {share(v)} on the same sequences: there the model's "
                "readout limits, not dilution.")
    below = [row for row in interval if row[1] < ACCURACY_BAR]
    if not below:
        return (f"The ideal vote readout (the most attended token answers) scores {share(min(r[2] for r in rows))} "
                "or more past training, like the model: nothing limits yet at these lengths.")
    n, a, v, _, (_, a_high), (v_low, _) = below[-1]  # the longest length where the model is below the bar
    if v_low > a_high:
        return (f"At {n:,} the ideal vote readout (the most attended token answers) scores {share(v)} against the "
                f"model's {share(a)} on the same sequences: the readout loses more than the attention does.")
    what = {True: "the attention limits (dilution, as the fitted law describes), not the readout",
            False: f"the attention limits, not the readout, and not by dilution ({regime.why})",
            None: "the attention limits, not the readout"}[regime.diluted]
    return (f"At {n:,} the ideal vote readout (the most attended token answers) scores {share(v)} against the "
            f"model's {share(a)} on the same sequences, their 95% intervals overlapping: {what}.")


def _partial_learner(verdict: Verdict, lengths: Sequence[int], accuracies: Sequence[float], train_length: int) -> str:
    """What a run that did not learn the task shows: nothing (near chance), or how much of its partial
    fit survives past the training length (linear attention fits 0.81 and keeps 0.23 at 4×)."""
    if verdict.in_range_accuracy < 2 * verdict.chance:
        return "This run did not learn the task (near chance even at its training length): no claim about length."
    far = [(n, a) for n, a in zip(lengths, accuracies, strict=True) if n >= 4 * train_length]
    kept = "" if not far else (f"; past the training length it keeps little of it: {share(far[0][1])} at "
                               f"{far[0][0] // train_length}× (chance {share(verdict.chance)})")
    return (f"This run did not fully learn the task ({share(verdict.in_range_accuracy)} at its training length, "
            f"below the {ACCURACY_BAR:.2f} a learned task needs){kept}.")


def inverse_mass_caption(lengths: Sequence[int], masses: Sequence[float], train_length: int,
                         fit: FitResult | None = None) -> Caption:
    """1/p against length: the measured log–log slope at the long end (the law's 1 holds only there). Whether
    it is the dilution regime is the run's one verdict (ui.captions.regime, from the law `fit` to it), not the
    slope: a run at chance also has p falling like 1/L, its attention spread over keys it never learned to
    tell apart."""
    n = np.asarray(lengths, dtype=float)
    inverse = 1 / np.asarray(masses, dtype=float)
    far = n >= train_length
    law = ("Past the training length 1/p grows with L; on these log–log axes the law's line bends from slope 0 "
           "toward slope 1 as (L − L_train)·e^(−m_out) comes to dominate 1/p(L_train).")
    if far.sum() < 3:
        return Caption("Too few lengths past the training length to read a slope.", law)
    x, y = np.log(n[far]), np.log(inverse[far])
    near_slope = (y[1] - y[0]) / (x[1] - x[0])
    far_slope = (y[-1] - y[-2]) / (x[-1] - x[-2])
    lead = (f"This run: slope {near_slope:.2f} between {int(n[far][0]):,} and {int(n[far][1]):,}, {far_slope:.2f} "
            f"between {int(n[far][-2]):,} and {int(n[far][-1]):,}: {_slope_reading(far_slope, dilution_regime(fit))}.")
    return Caption(lead, law)


def _slope_reading(slope: float, regime: DilutionRegime) -> str:
    """What a far slope says, beside the run's dilution verdict (`regime`: not known without a fit)."""
    near = abs(slope - 1) < 0.15
    if regime.diluted is None:
        return ("near 1, as the law has it far out; the fit on the Dilution page says whether the law describes "
                "this run" if near else "not near 1: the law's far regime is not reached in the range measured")
    if regime.diluted:
        return (regime.words if near else
                f"not yet near 1, yet {regime.words}: its slope-1 end lies past the lengths measured")
    if near:
        return (f"near 1, but {regime.words}, so p falls like 1/L because attention spreads over keys the run does "
                "not tell apart")
    return f"not near 1, and {regime.words}"


def length_refusal(config: RunConfig, model: torch.nn.Module, refused: Sequence[int]) -> str | None:
    """The run's own reason (lengen_core.analysis.evaluate.check_lengths) for the first length in `refused`,
    or None when `refused` is empty."""
    for length in refused[:1]:
        try:
            check_lengths(config, model, [length])
        except LengthError as error:
            return str(error)
    return None


def longest_note(train_length: int, longest: int, wanted: Sequence[int], measured: Sequence[int],
                 refusal: str | None) -> str | None:
    """Why the longest length measured is not the `longest` asked for, or None when it is. `wanted`: the
    lengths asked for (doublings of the training length up to `longest`); `measured`: those the run's encoding
    allows; `refusal`: the encoding's own reason for the first length it refused (a learned table's end)."""
    last = measured[-1]
    if last == longest:
        return None
    if wanted[-1] > last:
        left_out = len(wanted) - len(measured)
        why = refusal.split(";")[0] if refusal else "this run's encoding accepts no longer length"
        return (f"Measured up to L = {last:,}, not the {longest:,} asked for: {left_out} longer "
                f"length{'s' * (left_out != 1)} cannot be tested on this run ({why}).")
    return (f"Measured up to L = {last:,}, not the {longest:,} asked for: the lengths double from the training length "
            f"{train_length:,}, and the next doubling, {2 * last:,}, is past {longest:,}.")


def fit_caption(fit: FitResult) -> Caption:
    """The law fitted to the run: the run's dilution verdict (ui.captions.regime: the words the other captions
    of the page use) as the lead, then the fit itself and how its intervals were found."""
    regime = dilution_regime(fit).words
    lead = f"{regime[0].upper()}{regime[1:]}." if regime else ""
    if fit.fit is None:
        return Caption(lead, fit.reason) if regime else split_lead(fit.reason)
    return Caption(lead, f"Fitted law: {fit.reason} It is the law with the smallest largest relative error of p over "
                         "those lengths. The interval over the answers is a bootstrap over the evaluation samples, the "
                         "lengths held fixed; the one with the lengths fitted also holds m_out refitted to every "
                         "shorter window from the training length and with each length left out, so it is the one "
                         "to quote.")


def carrier_verdict(encoding: str | None, attention: str | None, aligned: bool,
                    learned: bool | None) -> tuple[str, list[str], bool]:
    """The Carrier page's one verdict on the carrier (read by the s(Δ) caption and the rank's): the clause that
    says whether it is aligned with k and what that means for C5, the claims named, and whether the run bears
    C5 out (RoPE with softmax, aligned, and the run learned). A run that did not learn tests no claim; neither
    does one whose encoding is not given."""
    said = "aligned with k" if aligned else "NOT aligned with k"
    if learned is False:
        return f"{said}; this run did not learn the task, so it tests no claim", [], False
    if encoding is None or attention is None:
        return said, [], False
    if expectation(encoding, attention).carrier:
        return ((f"{said}, as C5 says", ["C5"], True) if aligned else (f"{said}, contrary to C5", ["C5"], False))
    return f"{said} (no carrier is claimed for {encoding} with {attention} attention)", [], False


def carrier_caption(metrics: CarrierMetrics, baseline: CarrierMetrics, offset: int, trained_positions: bool,
                    verdict: Verdict | None, encoding: str | None = None, attention: str | None = None) -> Caption:
    """s(Δ): where it peaks and the page's carrier verdict (`carrier_verdict`, C5) as the lead; s(k) against the
    best other offset in range, beside the untrained start, and the claim's words as the rest."""
    def margin(m: CarrierMetrics) -> str:
        side = "above" if m.margin >= 0 else "below"
        return f"s(k) is {abs(m.margin):.2f} nats {side} the best other offset in the training range"

    learned = None if verdict is None else verdict.learned
    said, codes, _ = carrier_verdict(encoding, attention, metrics.aligned, learned)
    lead = f"This run's s(Δ) peaks at Δ = {metrics.argmax_offset} (k = {offset}): {said}."
    more = [f"Trained, {margin(metrics)}; untrained, it peaked at Δ = {baseline.argmax_offset} and {margin(baseline)}."]
    if metrics.aligned:
        more.append(f"Aligned means the peak is at k by at least {ALIGNMENT_MARGIN:g} nat.")
    elif metrics.argmax_offset == offset:
        more.append(f"The peak is at k but by less than {ALIGNMENT_MARGIN:g} nat: averaged over query positions, "
                    "this head's logits do not select offset k by position alone.")
    else:
        more.append("This head's positional rule does not select the target offset.")
    if trained_positions:
        more.append("A learned table has a carrier only over the offsets it was trained on: past the training "
                    "range its rows were never trained, so nothing is drawn there.")
    more.append(claims_note(codes))
    return Caption(lead, " ".join(part for part in more if part))


def spectrum_caption(amplitudes: np.ndarray, active: int, active_untrained: int) -> str:
    """How concentrated the spectrum is, against the untrained initialisation."""
    power = np.sort(np.asarray(amplitudes, dtype=float) ** 2)[::-1]
    top = float(power[: max(1, len(power) // 8)].sum() / power.sum()) if power.sum() > 0 else 0.0
    return (f"this run has {active} active frequencies (amplitude ≥ {ACTIVE_AMPLITUDE:.0%} of the largest) against "
            f"{active_untrained} untrained; the largest eighth of the frequencies holds {top:.0%} of the power.")


def untrained_text(value: float, spread: tuple[float, float] | None, form: str) -> str:
    """'0.108 (0.044–0.430)': the run's own initialisation, then the range over initialisations."""
    own = format(value, form)
    if spread is None:
        return own
    low, high = format(spread[0], form), format(spread[1], form)
    return f"{own} ({low} to {high})" if spread[0] < 0 else f"{own} ({low}–{high})"


def baseline_note(spread: BaselineRange | None) -> str:
    """What the untrained numbers beside each metric are."""
    if spread is None:
        return ("Each number beside the same number for this config's **untrained initialisation** (same seed): "
                "what training changed, not what the encoding gives for free.")
    return (f"Each number beside the same number for this config's **untrained initialisation** (same seed) and, in "
            f"brackets, its range over {spread.seeds} untrained initialisations of the config (seeds "
            f"{spread.first_seed} on). Every number is computed exactly from the weights, with no sampling: a "
            "trained value inside the untrained range is not a change training made.")


def toeplitz_reading(trained: float, spread: BaselineRange | None, relative: bool) -> str:
    """What this run's Toeplitz fraction shows, against the untrained range."""
    if relative:
        return (f"Toeplitz fraction {trained:.3f}: this encoding's expected logit depends on t − u alone for any "
                "weights (equivariant by construction), so it is 1 trained or not and says nothing about training.")
    if spread is None:
        return f"Toeplitz fraction {trained:.3f}; no untrained range is stored for this carrier."
    low, high = spread.toeplitz_fraction
    where = (f"above the untrained range {low:.3f}–{high:.3f}: training made the logits more a function of t − u"
             if trained > high else
             f"below the untrained range {low:.3f}–{high:.3f}: training made the logits depend more on absolute positions"
             if trained < low else
             f"inside the untrained range {low:.3f}–{high:.3f}: not a change training made")
    return f"Toeplitz fraction {trained:.3f}, {where} ({spread.seeds} initialisations)."


def rank_caption(rank: int, rank_untrained: int, size: int, spread: tuple[int, int] | None,
                 carrier_claim: bool) -> str:
    """The effective rank against the untrained start and its range over initialisations; a change only
    outside that range, and C5 is cited only for an aligned RoPE carrier."""
    low, high = (rank_untrained, rank_untrained) if spread is None else spread
    untrained = f"the untrained {rank_untrained}" + ("" if spread is None else f" (range {low}–{high} over initialisations)")
    change = "lower than" if rank < low else "higher than" if rank > high else "within"
    text = f"effective rank {rank} of {size} after training, {change} {untrained}"
    if rank >= low:
        return text + ": training did not make the positional logits lower rank than untrained heads are."
    if carrier_claim:
        return Caption(text + ": the learned rule is a low-rank carrier, as C5 says.", claims_note(["C5"]))
    return (text + ": training concentrated the positional logits on fewer directions (a relative rule or an "
            "absolute one: a head pinned to one key is rank 1; the Toeplitz fraction tells which).")


def recurrence_caption(offsets: Sequence[int]) -> Caption:
    """Where the near-recurrences are (the lead), and what they do and do not predict (the rest)."""
    return split_lead(
        f"far offsets (first: {offsets[0]:,}) where some token pair's logit comes back within ln 4 of the target's "
        "(negative gap: above it). Data, not a prediction: tested on 9 trained RoPE runs, only 6–30% of such offsets "
        "coincided with a measured step down in accuracy, and the first one came before the first measured drop in 8 "
        "of 9 runs (docs/near-recurrences.md). What predicts the drops is the dashed prediction from the weights on "
        "the Dilution page.")

"""Captions for what the logits and weights show: the carrier's alignment with k and Toeplitz fractions
(Compare), carrier and pinned heads (Transformer), shift equivariance (Theory), each computed from the
run's own numbers. No Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lengen_core.analysis.carrier import ALIGNMENT_MARGIN
from lengen_core.analysis.heads import CARRIER_WEIGHT, PIN_SHARE, HeadReport
from lengen_core.claims import expectation
from lengen_core.models.encodings import ENCODING_CLASSES
from ui.captions.common import Caption, claims_note, did_not_learn, listed, percent, share


def carrier_peak(values: Sequence[float], train_length: int, offset: int) -> tuple[int, float]:
    """(argmax Δ over the training range, margin of s(k) over every other offset there, in nats),
    as lengen_core.analysis.carrier measures them."""
    in_range = np.asarray(values[:train_length], dtype=np.float64)
    return int(np.argmax(in_range)), float(in_range[offset] - np.delete(in_range, offset).max())


def is_aligned(values: Sequence[float], train_length: int, offset: int) -> bool:
    """Does the carrier peak at k in the training range, at least ALIGNMENT_MARGIN above every other offset?"""
    argmax, margin = carrier_peak(values, train_length, offset)
    return argmax == offset and margin >= ALIGNMENT_MARGIN


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
        aligned = is_aligned(values, train_length, offset)
        return f"{text} (C5)" if aligned else f"{text}: this RoPE run's carrier is NOT aligned with k, as C5 says it is"
    return text


def toeplitz_baseline_text(baseline: float | None, spread: tuple[float, float] | None, relative: bool) -> str:
    """The untrained Toeplitz fraction with its range over initialisations: '0.108 (0.044–0.430)'."""
    if baseline is None:
        return "—"
    if relative:
        return f"{baseline:.3f} (1 for any weights)"
    return f"{baseline:.3f}" if spread is None else f"{baseline:.3f} ({spread[0]:.3f}–{spread[1]:.3f})"


def toeplitz_brief(label: str, trained: float, spread: tuple[float, float] | None, relative: bool) -> str:
    """'RoPE 1.000 (by construction)', 'Learned (APE) 0.065 (untrained 0.238–0.995)': a lead's clause."""
    if relative:
        return f"{label} {trained:.3f} (by construction)"
    return f"{label} {trained:.3f}" + ("" if spread is None else f" (untrained {spread[0]:.3f}–{spread[1]:.3f})")


def toeplitz_caption(label: str, trained: float, baseline: float | None, spread: tuple[float, float] | None,
                     relative: bool, seeds: int) -> str:
    """'RoPE 1.000: equivariant by construction …', or the trained fraction against the range of the
    untrained one over `seeds` initialisations: a change only outside that range."""
    if baseline is None:
        return f"{label} {trained:.3f} (no untrained baseline for a transformer head)"
    if relative:
        return (f"{label} {trained:.3f}: equivariant by construction (its expected logit depends on t − u alone "
                "for any weights, trained or not), so the fraction says nothing about what training did")
    if spread is None:
        return f"{label} {trained:.3f} against {baseline:.3f} untrained (no range over initialisations: no change claimed)"
    low, high = spread
    against = f"the untrained {low:.3f}–{high:.3f} over {seeds} initialisations"
    if trained > high:
        meaning = f"above {against}: training made its logits more a function of t − u"
    elif trained < low:
        meaning = f"below {against}: training made its logits depend more on absolute positions"
    else:
        meaning = f"within {against}: no change that the spread of untrained heads can tell apart"
    return f"{label} {trained:.3f} ({meaning})"


def _head_name(head: HeadReport) -> str:
    return f"L{head.layer}H{head.head}"


def head_grid_caption(heads: Sequence[HeadReport], encoding: str, attention: str, learned: bool | None) -> Caption:
    """Which heads carry the offset and which pin (the lead), and whether that is what the encoding's claim
    says (C8; a learned table's pinning, C4 too), each claim named with its words in the rest."""
    carriers = [_head_name(h) for h in heads if h.is_carrier]
    pinned = [f"{_head_name(h)} (key {h.pinned_key}, {percent(h.pinned_share)})" for h in heads
              if h.pinned_key is not None]
    both = [_head_name(h) for h in heads if h.is_carrier and h.pinned_key is not None]
    text = (f"red panels are carrier heads, here {', '.join(carriers) or 'none'}; purple ones pinned heads, here "
            f"{', '.join(pinned) or 'none'}")
    if both:
        text += f"; {', '.join(both)} select k inside training and pin past it"
    more = (f"A carrier head's s(Δ) peaks at k with at least {CARRIER_WEIGHT:g} of its weight on the target key; a "
            f"pinned head sends at least {PIN_SHARE:.0%} of its queries past training to one key inside it.")
    if learned is False:
        return Caption(f"{text}.{did_not_learn(learned)}", more)
    expected = expectation(encoding, attention)
    codes = [code.strip() for code in expected.heads_claim.split(",")] if expected.heads else []
    if expected.heads == "carries":
        lead = (f"{text}: a head carries the offset ({expected.heads_claim})." if carriers else
                f"{text}: this RoPE run has NO carrier head, contrary to {expected.heads_claim}.")
    elif expected.heads == "pins":
        lead = (f"{text}: the learned table pins ({expected.heads_claim})." if pinned else
                f"{text}: this learned-position run has NO pinned head, contrary to {expected.heads_claim}.")
    else:
        lead = f"{text}."
    return Caption(lead, f"{more} {claims_note(codes)}".strip())


def head_carrier_caption(name: str, head: HeadReport, offset: int, learned: bool | None) -> Caption:
    """One head's s(Δ) read by the verdict the head grid reads (HeadReport.is_carrier), so the two cannot
    disagree: 'L1H0 is a carrier head: its s(Δ) peaks at Δ = 3 = k, 0.95 of its weight on the target key.'"""
    peak = f"its s(Δ), measured from recorded logits, peaks at Δ = {head.argmax_offset}"
    peak += " = k" if head.argmax_offset == offset else f", not at k = {offset}"
    verdict = "is a carrier head" if head.is_carrier else "is not a carrier head"
    lead = f"{name} {verdict}: {peak}, {share(head.target_weight)} of its weight on the target key."
    margin = carrier_peak(head.carrier, len(head.carrier), offset)[1] if offset < len(head.carrier) else None
    more = (f"A carrier head peaks at k with at least {CARRIER_WEIGHT:g} of its weight on the target key (the head "
            "grid's rule)." + (f" s(k) is {margin:+.2f} nats against the best other offset in range." if margin is not None
                                else ""))
    return Caption(lead + did_not_learn(learned), more)


def heads_table_caption(heads: Sequence[HeadReport], offset: int) -> Caption:
    """What the table's columns show for this run's heads: the carriers and the heads peaking elsewhere (the
    lead), the Toeplitz fractions and pinned_key (the rest)."""
    carriers = [f"{_head_name(h)} ({share(h.target_weight)} on the target)" for h in heads if h.is_carrier]
    others = [f"{_head_name(h)} at Δ = {h.argmax_offset}" for h in heads if h.argmax_offset != offset]
    low, high = min(h.toeplitz_fraction for h in heads), max(h.toeplitz_fraction for h in heads)
    text = (f"carrier heads have argmax_offset = k = {offset} and most of their weight on the target: "
            f"{', '.join(carriers) or 'none here'}")
    if others:
        text += f"; other heads peak elsewhere: {', '.join(others)}"
    return Caption(f"{text}.", f"Toeplitz fractions run from {low:.3f} to {high:.3f}: near 1 says a head's mean logit "
                               "depends on t − u, not that it learned a rule. pinned_key is where most queries past "
                               "training attend.")


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
    relative = ENCODING_CLASSES[encoding].relative  # logits depend on t − u alone, trained or not
    if learned is False:
        claim = ". This run did not learn the task; the check reads its weights all the same."
    elif relative != bool(above):
        claim = " (C3)." if relative else f", as a {encoding} encoding's does."
    else:
        claim = f": this {encoding} run's logits do NOT depend on {'t − u alone' if relative else 'absolute positions'}."
    return f"{text}{claim}{beyond}"


def carriers_caption(peaks: Sequence[tuple[str, bool]], rest: str) -> Caption:
    """Compare's carrier chart: the lead sorts the runs (label, aligned: a peak at k at least ALIGNMENT_MARGIN
    above every other offset in range) into aligned and not; `rest` (each run's `alignment_caption`) follows."""
    aligned = [label for label, yes in peaks if yes]
    not_aligned = [label for label, yes in peaks if not yes]
    parts = ([f"aligned with k (a peak at Δ = k, {ALIGNMENT_MARGIN:g} nat or more above the rest): {listed(aligned)}"]
             if aligned else []) + ([f"not aligned: {listed(not_aligned)}"] if not_aligned else [])
    return Caption(f"Carriers {'; '.join(parts)}.", rest)

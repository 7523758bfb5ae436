"""Captions state what a run shows from its own numbers, and say so plainly when the run contradicts
the claim its chart is about. Each claim is tested both ways, and for a run that did not learn."""

from __future__ import annotations

import numpy as np
import pytest

from lengen_core.analysis.carrier import NearRecurrence
from lengen_core.analysis.fit import NOT_APPLICABLE, DilutionFit, FitResult
from lengen_core.analysis.heads import HeadReport
from lengen_core.analysis.horizon import measured_horizon
from lengen_core.analysis.trust import mass_miss
from lengen_core.analysis.verdict import Verdict
from lengen_core.claims import CLAIMS
from lengen_core.config import RunConfig, with_changes
from lengen_core.thresholds import ACCURACY_BAR, PREDICTION_BOUND
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import common as captions
from ui.captions import mechanism as mechanism_captions
from ui.captions import readouts

LENGTHS = (16, 32, 64, 128, 256)
CHANCE = 1 / 16
ROPE = with_changes(RunConfig(), encoding="rope", attention="softmax")
LEARNED = with_changes(RunConfig(), encoding="learned", attention="softmax")
LINEAR = with_changes(RunConfig(), encoding="rope", attention="linear")


def verdict(learned: bool, in_range: float = 1.0) -> Verdict:
    return Verdict(learned=learned, in_range_accuracy=in_range, in_range_low=in_range - 0.01,
                   in_range_high=min(1.0, in_range + 0.01), beyond_length=32, beyond_accuracy=0.06,
                   beyond_low=0.05, beyond_high=0.07, at_chance_beyond=True, chance=CHANCE, answers=2048,
                   reason="learned the task." if learned else "did not learn the task: accuracy 0.81.")


def curve(config: RunConfig, accuracy: list[float], learned: bool = True,
          label: str = "run") -> accuracy_captions.Curve:
    lows = [max(0.0, a - 0.05) for a in accuracy]  # an interval of ±0.05 about each point
    return accuracy_captions.run_curve(label, config, verdict(learned, accuracy[0]), LENGTHS, accuracy, lows)


# --- accuracy against length (Start, Compare, Transformer) -------------------------------------------


def test_horizon_and_chance_from_read_the_curve() -> None:
    accuracy, lows = [1.0, 0.95, 0.7, 0.1, 0.06], [0.97, 0.9, 0.6, 0.09, 0.03]
    assert captions.horizon_length(LENGTHS, accuracy, 16) == 32
    assert captions.horizon_length(LENGTHS, [0.5, 1.0, 1.0, 1.0, 1.0], 16) is None
    assert captions.chance_from(LENGTHS, lows, CHANCE, after=16) == 256  # 0.09 > chance + 0.02 at 128
    assert captions.chance_from(LENGTHS, [1, 0.05, 0.5, 0.05, 0.05], CHANCE, after=16) == 128  # from there on
    assert captions.chance_from(LENGTHS, lows, CHANCE, after=256) is None


def test_the_captions_horizon_is_the_measurements() -> None:
    """One rule for the measured horizon (lengen_core.analysis.horizon.measured_horizon, what a Measurement
    holds): lengths below the training length are not read, and a NaN accuracy does not hold. The captions'
    own copy kept both (a failed k + 1 gave no horizon; a NaN was read as holding)."""
    lengths = (4, *LENGTHS)
    accuracy = [0.5, 1.0, 0.95, 0.93, 0.7, 0.2]  # k + 1 = 4 below the bar: not the horizon's business
    assert captions.horizon(lengths, accuracy, 16) == measured_horizon(lengths, accuracy, 16)
    assert captions.horizon_length(lengths, accuracy, 16) == 64
    with_nan = [1.0, 1.0, float("nan"), 1.0, 1.0]
    assert captions.horizon_length(LENGTHS, with_nan, 16) == 32 == measured_horizon(LENGTHS, with_nan, 16).length
    assert captions.first_length_below(LENGTHS, with_nan, ACCURACY_BAR) == 64
    given = measured_horizon(LENGTHS, [1.0, 1.0, 1.0, 1.0, 0.2], 16)
    assert captions.horizon(LENGTHS, accuracy[1:], 16, given) is given  # a Measurement's horizon is read, not redone


def test_dilution_caption_reads_the_measurements_horizon() -> None:
    """Given the Measurement's horizon, the Dilution caption says that one (the page's horizon caption says it too)."""
    accuracy = [1.0, 1.0, 0.95, 0.6, 0.3]
    measured = measured_horizon(LENGTHS, accuracy, 16)
    text = readouts.dilution_caption("rope", "softmax", LENGTHS, accuracy, accuracy, 16, verdict(True),
                                     measured=measured)
    assert f"stays ≥ {ACCURACY_BAR} up to L = 64 (4×), below it from 128" in text.lead
    assert text == readouts.dilution_caption("rope", "softmax", LENGTHS, accuracy, accuracy, 16, verdict(True))


def test_rope_that_stays_near_one_is_said_to() -> None:
    text = accuracy_captions.curve_caption(curve(ROPE, [1.0, 1.0, 0.98, 0.95, 0.92], label="RoPE"))
    assert "**RoPE**: 1.00 at 1×, 1.00 at 2×, 0.98 at 4×" in text
    assert text.lead.endswith("It stays near 1 at every length measured past its training length, up to 256 (16×) (C1).")
    assert text.more.startswith("The claim: C1 (RoPE extrapolates")
    assert "NOT" not in text


def test_rope_that_leaves_one_is_judged_over_every_length_past_training() -> None:
    """C1 is judged at every measured length past training, not at 2× alone: a run that leaves 0.9 at 8×
    says where, and that C1 holds only up to 4× here."""
    text = accuracy_captions.curve_caption(curve(ROPE, [1.0, 1.0, 0.98, 0.6, 0.2], label="RoPE"))
    assert "≥ 0.90 up to 64 (4×)" in text
    assert "at chance from" not in text  # 0.20 at 16× is above chance (interval from 0.15)
    assert text.lead.endswith("It holds ≥ 0.90 up to 64 (4×) and leaves it at 128 (8×), still above chance at 256 (16×): "
                         "it extrapolates up to 4× here (C1).")
    assert "stays near 1 past its training length" not in text


def test_rope_at_chance_from_16x_is_never_said_to_stay_near_one() -> None:
    """Issue 27: 'It stays near 1 past its training length' was printed for a run at chance from 16× on,
    since C1 was judged at 2× alone. The caption names where it leaves 0.9 and where it reaches chance (the
    verdict's interval rule: the interval's lower end within 0.02 of 1/V)."""
    lengths = (40, 80, 160, 320, 640, 1280)
    accuracy = [1.0, 0.98, 0.93, 0.41, 0.026, 0.024]
    lows = [0.998, 0.976, 0.92, 0.39, 0.02, 0.019]
    text = accuracy_captions.curve_caption(accuracy_captions.run_curve("RoPE", with_changes(ROPE, vocab_size=40,
                                           offset=11, train_length=40), verdict(True), lengths, accuracy, lows))
    assert "It stays near 1 past its training length" not in text
    assert "It holds ≥ 0.90 up to 160 (4×) and leaves it at 320 (8×); from 640 (16×) on it is at chance" in text
    assert text.lead.endswith(": this run extrapolates up to 4× only, NOT to every length measured (C1).")
    # one interval above chance at the end and it is not 'at chance from' anywhere
    text = accuracy_captions.curve_caption(accuracy_captions.run_curve("RoPE", with_changes(ROPE, vocab_size=40,
                                           offset=11, train_length=40), verdict(True), lengths, accuracy,
                                           [*lows[:-1], 0.06]))
    assert "at chance" not in text and "still above chance at 1,280 (32×)" in text


# --- the Dilution chart's caption: C1 over every length, steps, which readout limits ------------------

RETRIEVAL = with_changes(ROPE, vocab_size=40, offset=11, train_length=40)
STEP_LENGTHS = (40, 80, 112, 113, 160)
STEP_ACCURACY = [1.0, 0.98, 0.963, 0.852, 0.80]


def dilution(accuracy, lengths=STEP_LENGTHS, **extra) -> str:
    lows = extra.pop("accuracy_low", [max(0.0, a - 0.01) for a in accuracy])
    judged = Verdict(learned=True, in_range_accuracy=1.0, in_range_low=0.998, in_range_high=1.0, beyond_length=80,
                     beyond_accuracy=0.98, beyond_low=0.97, beyond_high=0.99, at_chance_beyond=False, chance=1 / 40,
                     answers=2048, reason="learned the task.")
    return readouts.dilution_caption("rope", "softmax", lengths, accuracy, accuracy, 40, judged, accuracy_low=lows,
                                     **extra)


def test_a_step_is_named_with_its_near_recurrence_and_not_called_graceful() -> None:
    """Issue 27: on V 40, k 11, L_train 40, seed 9, accuracy falls from 0.963 at 112 tokens to 0.852 at 113,
    where a near-recurrence of the carrier enters at Δ = 112; the caption called the decay graceful (C6)."""
    recurrences = (NearRecurrence(95, 1, 2, 1.2), NearRecurrence(112, 3, 4, 0.4), NearRecurrence(140, 3, 5, 0.1))
    text = dilution(STEP_ACCURACY, recurrences=recurrences, searched_to=1 << 16)
    assert "decays by dilution" not in text and "a gradual decay, as C6 says" not in text
    assert ("Its decay is NOT gradual, contrary to C6: accuracy steps by more than 0.1 from 0.96 at 112 (2.8×) to "
            "0.85 at 113 (2.8×), a step of 0.11, where a near-recurrence of the carrier enters at Δ = 112 "
            "(its logit 0.40 nats below the target's).") in text.more
    assert "C6 (accuracy decays gracefully with length by an attention-dilution law)" in text.more  # named, in words
    # no recurrence listed in the interval although the search covered it: said so; not covered: nothing said
    assert "with no near-recurrence of the carrier at Δ = 112–112" in dilution(STEP_ACCURACY, recurrences=recurrences[:1],
                                                                              searched_to=1 << 16)
    bare = dilution(STEP_ACCURACY, recurrences=recurrences[:1], searched_to=100)
    assert "to 0.85 at 113 (2.8×), a step of 0.11." in bare.more and "near-recurrence" not in bare
    # several listed between two lengths: the strongest (the largest logit against the target's: the smallest gap)
    wide = dilution([1.0, 0.98, 0.6], (40, 80, 160), recurrences=(*recurrences, NearRecurrence(150, 1, 1, -0.3)),
                    searched_to=1 << 16)
    assert ("from 0.98 at 80 (2×) to 0.60 at 160 (4×), a step of 0.38, where a near-recurrence of the carrier enters "
            "at Δ = 150 (its logit 0.30 nats above the target's; the strongest of 4 listed at Δ = 80–159)") in wide


def test_without_a_step_the_decay_is_called_gradual() -> None:
    text = dilution([1.0, 0.98, 0.95, 0.93, 0.90])
    assert "changes by at most 0.1 between neighbouring lengths measured: a gradual decay, as C6 says" in text
    assert "NOT" not in text
    assert [s[:2] for s in captions.steps(STEP_LENGTHS, STEP_ACCURACY)] == [(112, 113)]
    assert captions.steps(STEP_LENGTHS, [1.0, 0.95, 0.85, 0.8, 0.75]) == []  # 0.10 is no step: larger than 0.1 is


def test_the_dilution_caption_judges_c1_over_every_length() -> None:
    lengths = (40, 80, 160, 320, 640, 1280)
    accuracy = [1.0, 0.98, 0.93, 0.41, 0.026, 0.024]
    text = dilution(accuracy, lengths, accuracy_low=[0.998, 0.976, 0.92, 0.39, 0.02, 0.019])
    assert "As C1 and C6 say" not in text and "stays near 1 past its training length" not in text
    assert "; it stays ≥ 0.9 up to L = 160 (4×), below it from 320." in text.lead
    assert "From 640 (16×) on it is at chance: this run extrapolates up to 4× only, NOT to every length measured (C1)." \
        in text.lead  # the claim's verdict is in the lead, two sentences from the run's numbers
    assert captions.sentence_count(text.lead) == 2 and "gradual" in text.more


def test_the_readout_limits_where_p_is_above_2_over_v_and_the_model_is_at_chance() -> None:
    """Issue 27: at 640 tokens p = 0.158 > 2/V = 0.05, yet accuracy 0.026 (chance): the ideal vote readout,
    on the same sequences, scores about 0.78, so the readout limits there, not dilution."""
    lengths = (40, 160, 640)
    text = readouts.readout_text(lengths, [1.0, 0.93, 0.026], [1.0, 0.97, 0.78], [0.9, 0.4, 0.158], 4096, 1 / 40, 40)
    assert text.startswith("Readout-limited at 640 (16×): p = 0.16 is above 2/V = 0.050, yet the model's accuracy "
                           "0.026 is at chance, while the ideal vote readout")
    assert "scores 0.78 on the same sequences: there the model's readout limits, not dilution." in text
    # the vote readout as low as the model: the attention limits
    text = readouts.readout_text(lengths, [1.0, 0.93, 0.3], [1.0, 0.93, 0.31], [0.9, 0.4, 0.03], 4096, 1 / 40, 40)
    assert text.endswith("scores 0.31 against the model's 0.30 on the same sequences, their 95% intervals "
                         "overlapping: the attention limits, not the readout.")  # dilution or not: no law to say
    # p at or below 2/V with the model at chance: not the readout-limited regime
    assert not readouts.readout_text(lengths, [1.0, 0.9, 0.026], [1.0, 0.9, 0.3], [0.9, 0.4, 0.04], 4096, 1 / 40,
                                     40).startswith("Readout-limited")
    # not measured (numbers stored before it was): nothing said, in the caption either
    assert readouts.readout_text(lengths, [1.0, 0.93, 0.026], [None, None, None], [0.9, 0.4, 0.158], 4096,
                                 1 / 40, 40) == ""
    text = dilution([1.0, 0.93, 0.026], lengths, target_mass=[0.9, 0.4, 0.158], vote_accuracy=[1.0, 0.97, 0.78],
                    samples=4096)
    assert "Readout-limited at 640 (16×)" in text


def test_rope_that_does_not_stay_near_one_is_said_not_to() -> None:
    text = accuracy_captions.curve_caption(curve(ROPE, [1.0, 0.41, 0.2, 0.1, 0.06], label="RoPE"))
    assert "This RoPE run does NOT stay near 1 past its training length: 0.41 at 32 (2×)" in text
    assert "stays near 1 past its training length (C1)" not in text


def test_learned_table_at_chance_past_training_is_said_to_fall() -> None:
    text = accuracy_captions.curve_caption(curve(LEARNED, [1.0, 0.07, 0.06, 0.06, 0.06]))
    assert "at chance from 32 (2×) on" in text
    assert "falls to chance at the first length past training (C1)" in text
    assert "NOT" not in text


def test_learned_table_above_chance_past_training_is_said_not_to_fall() -> None:
    text = accuracy_captions.curve_caption(curve(LEARNED, [1.0, 0.55, 0.3, 0.07, 0.06]))
    assert ("This learned-position run does NOT fall to chance past its training length, contrary to C1: 0.55 at "
            "32 (2×)") in text.lead
    assert "95% interval from 0.50" in text


def test_linear_attention_that_did_not_learn_tests_no_claim() -> None:
    """The Start page's old caption said linear attention falls to chance at once; it measures 0.81,
    0.27, 0.21, 0.14 at 1, 2, 4, 8×, and did not learn the task: its caption says that, no claim."""
    lengths = (16, 32, 64, 128)
    accuracy = [0.81, 0.27, 0.21, 0.14]
    lows = [0.74, 0.20, 0.15, 0.09]
    text = accuracy_captions.curve_caption(
        accuracy_captions.run_curve("linear", LINEAR, verdict(False, 0.81), lengths, accuracy, lows))
    assert "did not learn the task" in text and "tests no claim" in text
    assert "0.81 at 1×, 0.27 at 2×, 0.21 at 4×" in text
    assert "above chance up to 128" in text
    assert "C7" not in text and "NOT" not in text


def test_linear_attention_that_learned_is_read_against_c7() -> None:
    assert "(C7)" in accuracy_captions.curve_caption(curve(LINEAR, [0.95, 0.06, 0.06, 0.06, 0.06]))
    assert "does NOT fall to chance" in accuracy_captions.curve_caption(curve(LINEAR, [0.95, 0.5, 0.4, 0.3, 0.2]))


def test_encodings_without_a_claim_get_numbers_only() -> None:
    nope = with_changes(RunConfig(), encoding="nope")
    text = accuracy_captions.curve_caption(curve(nope, [1.0, 0.5, 0.3, 0.1, 0.06]))
    assert "0.50 at 2×" in text
    assert "C1" not in text and "NOT" not in text


def test_a_transformer_curve_names_c8_and_the_caption_ends_with_chance() -> None:
    shift = with_changes(ROPE, task="shift", n_layers=2, n_heads=2)
    text = accuracy_captions.curves_caption([curve(shift, [1.0, 1.0, 0.95, 0.9, 0.7])], note="Bands: 95%.")
    assert text.lead == "Past the training length: **run** ≥ 0.90 up to 128 (8×) (C1, C8)."
    assert "(C1, C8)" in text.more and "Chance 1/V = 0.062. Bands: 95%." in text.more
    assert text.more.endswith("The claims: C1 (RoPE extrapolates to longer inputs, learned absolute positions do "
                              f"not); C8 ({CLAIMS['C8']}).")


def test_a_curve_over_every_position_reads_no_claim() -> None:
    """Compare scores a shift run over every position t ≥ k: at 2× half of them are inside training, so
    0.48 there is no evidence against C1 (the learned transformer preset is at chance past training)."""
    shift = with_changes(LEARNED, task="shift", n_layers=2, n_heads=2)
    accuracy = [1.0, 0.48, 0.26, 0.16, 0.11]
    text = accuracy_captions.curve_caption(accuracy_captions.run_curve("T", shift, verdict(True), LENGTHS, accuracy,
                                                                       [a - 0.02 for a in accuracy],
                                                                       every_position=True))
    assert "0.48 at 2×" in text and "those inside training included" in text
    assert "NOT" not in text and "C1" not in text


# --- target mass, carrier, key numbers (Compare) ------------------------------------------------------


def fitted(error: float = 0.08) -> FitResult:
    law = DilutionFit(16, 1.1, 5.27, 5.22, 5.32, error, 5, 256, 128)
    return FitResult("fitted", law, "m_out 5.27")


def test_mass_caption_says_whether_the_prediction_tracks_the_measurement() -> None:
    measured = [0.89, 0.86, 0.82, 0.53, 0.44]
    close = accuracy_captions.mass_caption("RoPE", LENGTHS, measured, [0.88, 0.87, 0.82, 0.56, 0.45], fitted(), 16)
    assert "p 0.89 at 1×, 0.86 at 2×, 0.44 at 16×" in close
    assert "within 8% (m_out 5.27)" in close
    missed = accuracy_captions.mass_caption("RoPE", LENGTHS, measured, None, fitted(0.14), 16)
    assert "does NOT describe it within 10%: it misses by 14% at 128 (m_out 5.27)" in missed
    assert "within 0.03 of it at every length" in close
    far = accuracy_captions.mass_caption("RoPE", LENGTHS, measured, [0.88, 0.87, 0.4, 0.56, 0.45], fitted(), 16)
    assert "does NOT track it: 0.40 against 0.82 measured at 64" in far


def test_mass_caption_judges_the_prediction_by_the_trust_verdicts_bound() -> None:
    """One "the prediction agrees" (lengen_core.thresholds.PREDICTION_BOUND, the trust verdict's): a gap of 0.07
    on p is past it (the caption's own 0.1 called it tracking while the verdict called it untrusted), unless two
    standard errors of the measured p take it back inside, as they do for the verdict."""
    measured, predicted = [0.89, 0.86, 0.82, 0.53, 0.44], [0.89, 0.86, 0.75, 0.53, 0.44]
    assert PREDICTION_BOUND < 0.07
    missed = accuracy_captions.mass_caption("RoPE", LENGTHS, measured, predicted, fitted(), 16)
    assert "does NOT track it: 0.75 against 0.82 measured at 64" in missed
    noisy = accuracy_captions.mass_caption("RoPE", LENGTHS, measured, predicted, fitted(), 16, sems=[0.01] * 5)
    assert f"within 0.07 of it at every length (at most {PREDICTION_BOUND:g} beyond two standard errors)" in noisy
    assert mass_miss(0.75, 0.82, 0.01) <= PREDICTION_BOUND < mass_miss(0.75, 0.82, 0.0)


def test_mass_caption_gives_no_law_for_a_run_at_chance() -> None:
    at_chance = FitResult("at_chance", None, "No law: at chance.")
    text = accuracy_captions.mass_caption("APE", LENGTHS, [1.0, 0.011, 0.008, 0.003, 0.003], None, at_chance, 16)
    assert "no dilution law (at chance)" in text and "prediction" not in text


def test_m_out_text_gives_the_interval_or_why_there_is_none() -> None:
    assert accuracy_captions.m_out_text(fitted()) == "5.27 (5.22–5.32)"
    assert accuracy_captions.m_out_text(fitted(0.14)) == "5.27 (5.22–5.32); law off by 14%"
    assert accuracy_captions.m_out_text(FitResult("not_learned", None, "")) == "not learned"
    assert accuracy_captions.m_out_text(NOT_APPLICABLE) == "n/a (transformer)"


def carrier_with(peak_at: int, margin: float) -> np.ndarray:
    values = np.zeros(32)
    values[peak_at] = margin
    return values


def test_alignment_needs_the_peak_at_k_and_a_margin() -> None:
    aligned = mechanism_captions.alignment_caption("RoPE", carrier_with(3, 2.8), 16, 3, rope_softmax=True, learned=True)
    assert "peaks at Δ = 3 = k, 2.8 nats above every other offset in range: aligned (C5)" in aligned
    thin = mechanism_captions.alignment_caption("APE", carrier_with(3, 0.43), 16, 3, rope_softmax=False, learned=True)
    assert "by only 0.43 nats" in thin and "not aligned" in thin and "C5" not in thin
    wrong = mechanism_captions.alignment_caption("RoPE", carrier_with(0, 2.0), 16, 3, rope_softmax=True, learned=True)
    assert "this RoPE run's carrier is NOT aligned with k" in wrong
    untrained = mechanism_captions.alignment_caption("lin", carrier_with(0, 2.0), 16, 3, rope_softmax=True,
                                                     learned=False)
    assert "did not learn" in untrained and "NOT" not in untrained


def test_toeplitz_is_read_against_its_untrained_range() -> None:
    rope = mechanism_captions.toeplitz_caption("RoPE", 1.000, 1.000, (1.0, 1.0), relative=True, seeds=8)
    assert "equivariant by construction" in rope and "training made" not in rope
    below = mechanism_captions.toeplitz_caption("APE", 0.108, 0.980, (0.95, 0.99), relative=False, seeds=8)
    assert "below the untrained 0.950–0.990 over 8 initialisations" in below and "absolute positions" in below
    above = mechanism_captions.toeplitz_caption("APE", 0.6, 0.2, (0.04, 0.43), relative=False, seeds=8)
    assert "training made its logits more a function of t − u" in above
    # inside the range: a difference from the run's own start that untrained heads show too is no change
    inside = mechanism_captions.toeplitz_caption("sin", 0.40, 0.108, (0.044, 0.430), relative=False, seeds=8)
    assert "within the untrained 0.044–0.430" in inside and "training made" not in inside
    assert "no untrained baseline" in mechanism_captions.toeplitz_caption("Transformer", 0.999, None, None, False, 0)


# --- attention (Attention, Transformer) --------------------------------------------------------------


def keys_relative(length: int, k: int = 3) -> np.ndarray:
    return np.maximum(np.arange(length) - k, 0)


def keys_pinned(length: int, key: int = 12, train_length: int = 16, k: int = 3) -> np.ndarray:
    keys = keys_relative(length, k)
    keys[train_length:] = key
    return keys


def test_argmax_trace_counts_relative_and_pinned_queries() -> None:
    relative = attention_captions.argmax_trace(keys_relative(64), 16, 3)
    assert relative.relative_beyond == 1.0 and relative.beyond == 48 and not relative.pinned
    pinned = attention_captions.argmax_trace(keys_pinned(64), 16, 3)
    assert pinned.relative_beyond == 0.0 and pinned.common_key == 12 and pinned.common_share == 1.0 and pinned.pinned
    assert attention_captions.argmax_trace(keys_relative(16), 16, 3).relative_beyond is None


@pytest.mark.parametrize("keys, expected, holds, phrase", [
    (keys_relative(64), "relative", True, "the slope-1 line of a relative rule (C3)"),
    (keys_pinned(64), "relative", False, "this RoPE run does NOT follow t − k past its training length"),
    (keys_pinned(64), "pinned", True, "100% to key 12 = L_train − 1 − k: pinned inside the training range (C4)"),
    (keys_relative(64), "pinned", False, "this learned-position run is NOT pinned past its training length"),
])
def test_trace_caption_follows_or_contradicts_the_claim(keys, expected, holds, phrase) -> None:
    text = attention_captions.trace_caption(attention_captions.argmax_trace(keys, 16, 3), expected, learned=True)
    assert phrase in text
    assert ("NOT" in text) != holds


def test_trace_caption_of_a_run_that_did_not_learn_makes_no_claim() -> None:
    text = attention_captions.trace_caption(attention_captions.argmax_trace(keys_pinned(64), 16, 3), "relative",
                                            learned=False)
    assert "0% of the 48 queries attend most to t − k" in text
    assert "did not learn the task" in text and "NOT" not in text and "C3" not in text


def test_trace_caption_names_the_last_query_of_the_retrieval_task() -> None:
    text = attention_captions.trace_caption(attention_captions.argmax_trace(keys_pinned(64), 16, 3), "pinned",
                                            learned=True)
    assert "the last query, the only one the retrieval task scores, to key 12 (t − k = 60)" in text


def test_zoom_caption_says_when_the_last_query_misses_the_target() -> None:
    assert "attends most to key 60 = t − k" in attention_captions.zoom_caption(60, 60, 0.84, learned=True)
    missed = attention_captions.zoom_caption(12, 60, 0.043, learned=True)
    assert "attends most to key 12, NOT to the circled target key 60" in missed and "0.043" in missed


def head(layer: int, index: int, carrier: bool, pinned_key: int | None, argmax: int = 3) -> HeadReport:
    return HeadReport(layer, index, np.zeros(16), argmax, 0.99, 4, 0.95 if carrier else 0.1, carrier, pinned_key,
                      0.9 if pinned_key is not None else 0.02)


def test_head_grid_caption_checks_carriers_for_rope_and_pinning_for_a_table() -> None:
    carriers = [head(0, 0, False, None, 0), head(1, 0, True, None)]
    assert "here L1H0" in mechanism_captions.head_grid_caption(carriers, "rope", "softmax", True)
    assert "(C8)" in mechanism_captions.head_grid_caption(carriers, "rope", "softmax", True)
    assert "this RoPE run has NO carrier head" in mechanism_captions.head_grid_caption([head(0, 0, False, None, 0)],
                                                                                       "rope", "softmax", True)
    pinned = [head(0, 0, False, 12, 0), head(1, 0, True, 9)]
    text = mechanism_captions.head_grid_caption(pinned, "learned", "softmax", True)
    assert "L0H0 (key 12, 90%)" in text and "L1H0 select k inside training and pin past it" in text
    assert "(C4, C8)" in text
    assert "NO pinned head" in mechanism_captions.head_grid_caption(carriers, "learned", "softmax", True)


def test_heads_table_caption_lists_this_runs_carriers() -> None:
    text = mechanism_captions.heads_table_caption([head(0, 0, False, None, 0), head(1, 0, True, None)], 3)
    assert "L1H0 (0.95 on the target)" in text and "L0H0 at Δ = 0" in text


@pytest.mark.parametrize("encoding, past, holds, phrase", [
    ("rope", 1.0, True, "RoPE holds its accuracy past the training length (C8)"),
    ("rope", 0.4, False, "this RoPE run does NOT hold its accuracy past the training length"),
    ("learned", 0.07, True, "at chance (0.062) on the first positions it never trained"),
    ("learned", 0.6, False, "this learned-position run does NOT drop to chance"),
])
def test_position_caption_follows_or_contradicts_the_claim(encoding, past, holds, phrase) -> None:
    positions = np.arange(3, 64)
    accuracy = np.where(positions < 16, 1.0, np.where(positions < 32, past, 0.3))
    text = accuracy_captions.position_caption(positions, accuracy, 64, 16, CHANCE, 64, encoding, "softmax", learned=True)
    assert "1.00 on the positions inside training" in text
    assert phrase in text
    assert ("NOT" in text) != holds


# --- equivariance (Theory), training (Train) ----------------------------------------------------------

SHIFTS = (0, 1, 10, 100, 1_000, 10_000)


def test_equivariance_caption_for_rope_at_round_off() -> None:
    text = mechanism_captions.equivariance_caption(SHIFTS, [0, 1e-7, 2e-7, 1e-6, 1e-6, 2e-6], 13.0, 1e-3, "rope", True)
    assert "the largest difference over shifts up to 10,000 is 2.0e-06" in text and "(C3)" in text


def test_equivariance_caption_says_when_rope_is_not_equivariant() -> None:
    text = mechanism_captions.equivariance_caption(SHIFTS, [0, 1e-7, 1e-6, 0.5, 0.5, 0.5], 13.0, 1e-3, "rope", True)
    assert "already 0.5 at the shift s = 100" in text
    assert "this rope run's logits do NOT depend on t − u alone" in text


def test_equivariance_caption_for_a_learned_table() -> None:
    text = mechanism_captions.equivariance_caption(SHIFTS, [0, 16.0, 15.0, 14.0, None, None], 16.0, 1e-3, "learned",
                                                   True)
    assert "already 16 at the shift s = 1" in text and "as a learned encoding's does" in text
    assert "Shifts from 1,000 on leave the position table" in text
    flat = mechanism_captions.equivariance_caption(SHIFTS, [0, 1e-7, 1e-7, 1e-7, 1e-7, 1e-7], 16.0, 1e-3, "learned",
                                                   True)
    assert "this learned run's logits do NOT depend on absolute positions" in flat


def test_training_caption_carries_the_verdict() -> None:
    text = accuracy_captions.training_caption(1500, 25.5, "cpu", False, 0.77, verdict(False, 0.81), 16)
    assert text.startswith("1,500 steps in 25.5 s on cpu, final batch accuracy 0.77.")
    assert "**Did not learn the task**: accuracy 0.81 at the training length 16" in text


# --- the law's status read alike by Rules, Compare and Dilution (issue 27) -----------------------------------


def test_every_caption_reads_the_fits_no_dilution_status() -> None:
    """The fit decides `no_dilution` (lengen_core.analysis.fit); the Rules cell, the Compare sentence and the
    m_out figure all say there is no law, with the fit's own reason, never a figure."""
    from lengen_core.analysis.fit import fit_dilution
    from ui.rules.captions import RuleCurve, law_cell

    lengths, masses = [16, 32, 64, 128, 256], [0.82, 0.89, 0.92, 0.96, 0.97]  # p rises under log-n
    result = fit_dilution(lengths, masses, [0.003] * 5, 16, 16)
    assert result.status == "no_dilution"
    curve = RuleCurve("log-n", lengths, [1.0] * 5, [0.99] * 5, [1.0] * 5, masses)
    cell, why = law_cell(result, curve, 16)
    assert cell == "no law: p does not fall" and result.reason in why and "0.820 at 16 to 0.970 at 256" in why
    assert accuracy_captions.m_out_text(result) == "p does not fall"
    text = accuracy_captions.mass_caption("log-n", lengths, masses, None, result, 16)
    assert "no dilution law (p does not fall)" in text and "m_out" not in text


def test_the_law_sentence_names_its_key_count_its_span_and_the_plain_law() -> None:
    plain = DilutionFit(16, 1.1, 5.10, 5.05, 5.15, 0.12, 5, 256, 64, m_out_lengths_low=4.9, m_out_lengths_high=5.3)
    weighted = DilutionFit(16, 1.1, 5.27, 5.22, 5.32, 0.03, 5, 256, 128, (16, 32, 64, 128, 256),
                           (0.0, 10.0, 40.0, 110.0, 240.0), 5.0, 5.6, plain)
    text = accuracy_captions.mass_caption("RoPE", [*LENGTHS, 512], [0.89, 0.86, 0.82, 0.53, 0.44, 0.1], None,
                                          FitResult("fitted", weighted, ""), 16)
    assert "(far keys counted by their weight) fits every point from 16 to 256 within 3% (m_out 5.27)" in text
    assert "the plain law (K = n − L_train) misses by 12% (m_out 5.10)" in text
    assert "past 256, where p ≤ 2/V, the law is not drawn" in text
    assert accuracy_captions.m_out_text(FitResult("fitted", weighted, "")) == "5.27 (5.00–5.60; answers alone 5.22–5.32)"


def test_a_rules_cell_gives_the_interval_to_quote_only() -> None:
    from ui.rules.captions import RuleCurve, law_cell

    law = DilutionFit(16, 1.1, 5.27, 5.22, 5.32, 0.03, 5, 256, 128, m_out_lengths_low=5.0, m_out_lengths_high=5.6)
    curve = RuleCurve("none", LENGTHS, [1.0] * 5, [0.99] * 5, [1.0] * 5, [0.89, 0.86, 0.82, 0.53, 0.44])
    assert law_cell(FitResult("fitted", law, ""), curve, 16) == ("5.27 (5.00–5.60)", None)


# --- one verdict per fact, and short leads (issue 40 §5) ------------------------------------------------


def test_the_carrier_verdict_names_c5_only_where_it_is_claimed() -> None:
    assert readouts.carrier_verdict("rope", "softmax", True, True) == ("aligned with k, as C5 says", ["C5"], True)
    said, codes, bears = readouts.carrier_verdict("rope", "softmax", False, True)
    assert said == "NOT aligned with k, contrary to C5" and codes == ["C5"] and not bears
    said, codes, bears = readouts.carrier_verdict("learned", "softmax", True, True)
    assert "C5" not in said and codes == [] and not bears
    said, codes, bears = readouts.carrier_verdict("rope", "softmax", True, False)
    assert "did not learn" in said and "C5" not in said and not bears


def test_a_heads_detail_reads_the_grids_carrier_verdict() -> None:
    """The detail once re-tested alignment by a margin the grid did not use: a head the grid lists as a carrier
    could read 'not aligned' beside it. Both now read HeadReport.is_carrier."""
    for carrier in (True, False):
        said = mechanism_captions.head_carrier_caption("L1H0", head(1, 0, carrier, None), 3, learned=True)
        assert said.lead.startswith("L1H0 is a carrier head" if carrier else "L1H0 is not a carrier head")
        assert ("L1H0" in mechanism_captions.head_grid_caption([head(1, 0, carrier, None)], "rope", "softmax",
                                                                True).split("; purple")[0]) == carrier


def test_the_position_caption_reads_the_curves_past_verdict() -> None:
    """Accuracy by position and by length on the Transformer page say the same about holding past training."""
    positions = np.arange(3, 64)
    accuracy = np.where(positions < 16, 1.0, 0.95)  # just past training: 0.95, above the bar
    holds = accuracy_captions.position_caption(positions, accuracy, 64, 16, CHANCE, 64, "rope", "softmax", True)
    assert "RoPE holds its accuracy" in holds
    falls = curve(ROPE, [1.0, 0.41, 0.2, 0.1, 0.06])
    assert accuracy_captions.past_verdict(falls) == "between"
    text = accuracy_captions.position_caption(positions, accuracy, 64, 16, CHANCE, 64, "rope", "softmax", True,
                                              accuracy_captions.past_verdict(falls))
    assert "does NOT hold its accuracy past the training length, contrary to C8" in text


def test_leads_are_short_and_name_what_they_contradict() -> None:
    """The trace, the carrier and the curves' leads: at most LEAD_SENTENCES sentences and LEAD_CHARS characters,
    a contradiction naming its claim in the same sentence, the claim's words in the rest."""
    trace = attention_captions.trace_caption(attention_captions.argmax_trace(keys_relative(64), 16, 3), "pinned", True)
    assert "contrary to C4" in trace.lead and "C4 (a learned table" in trace.more
    curves = accuracy_captions.curves_caption([curve(ROPE, [1.0, 0.41, 0.2, 0.1, 0.06], label="RoPE"),
                                               curve(LEARNED, [1.0, 0.07, 0.06, 0.06, 0.06], label="APE")])
    assert "**RoPE** 0.41 at 32 (2×), neither near 1 nor at chance, contrary to C1" in curves.lead
    assert "**APE** at chance from 32 (2×) on (C1)" in curves.lead
    for text in (trace, curves):
        assert captions.sentence_count(text.lead) <= captions.LEAD_SENTENCES and len(text.lead) <= captions.LEAD_CHARS

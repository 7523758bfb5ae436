"""prediction_status and horizon_reason (lengen_core.analysis.trust) on hand-made numbers (fast): a prediction
that misses the measurement, whose expansion is not small, or that cannot tell its heaviest keys apart
is untrusted, with the reason; one that agrees is ok; a run without a predicted horizon says why."""

from __future__ import annotations

from lengen_core.analysis.dilution import DOMINANT_KEYS, Prediction
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.trust import (
    MAX_MASS_CORRECTION,
    PREDICTION_BOUND,
    horizon_reason,
    prediction_status,
)
from lengen_core.analysis.verdict import Verdict

L = 32
VERDICT = Verdict(learned=True, in_range_accuracy=1.0, in_range_low=0.998, in_range_high=1.0, beyond_length=64,
                  beyond_accuracy=0.35, beyond_low=0.33, beyond_high=0.37, at_chance_beyond=False, chance=1 / 16,
                  answers=2048, reason="learned")


def _report(length: int, accuracy: float, mass: float, half_width: float = 0.02, sem: float = 0.005) -> LengthReport:
    return LengthReport(length, 2048, accuracy, accuracy - half_width, accuracy + half_width, mass, sem, length - 4,
                        mass, 0.0)


def _prediction(length: int, accuracy: float, mass: float, **more) -> Prediction:
    return Prediction(length, mass, accuracy, accuracy, **more)


def test_a_prediction_within_its_bound_is_ok():
    predictions = {L: _prediction(L, 1.0, 1.0), 4 * L: _prediction(4 * L, 0.52, 0.52)}
    status = prediction_status(predictions, [_report(4 * L, 0.53, 0.526)], L, VERDICT)
    assert status.trusted and status.status == "ok" and "32, 128" in status.reason


def test_the_issue_s_miss_at_the_training_length_is_untrusted():
    """The issue's run before the fix: 0.820 predicted at L_train, 1.000 measured (only the verdict there)."""
    predictions = {L: _prediction(L, 0.820, 1.0), 4 * L: _prediction(4 * L, 0.53, 0.52)}
    status = prediction_status(predictions, [_report(4 * L, 0.53, 0.526)], L, VERDICT)
    assert status.status == "untrusted" and "0.820" in status.reason and "training length" in status.reason


def test_a_miss_just_inside_the_bound_is_ok_and_just_outside_is_not():
    report = _report(4 * L, 0.50, 0.50, half_width=0.02)
    inside = _prediction(4 * L, 0.52 + PREDICTION_BOUND - 0.001, 0.50)
    outside = _prediction(4 * L, 0.52 + PREDICTION_BOUND + 0.001, 0.50)
    assert prediction_status({4 * L: inside}, [report], L, VERDICT).trusted
    assert not prediction_status({4 * L: outside}, [report], L, VERDICT).trusted


def test_a_target_mass_miss_is_untrusted():
    """The issue's 4× before the fix: p 0.228 predicted, 0.567 measured."""
    status = prediction_status({4 * L: _prediction(4 * L, 0.57, 0.228)}, [_report(4 * L, 0.574, 0.567)], L, VERDICT)
    assert not status.trusted and "p 0.228" in status.reason


def test_a_large_second_order_term_is_untrusted_even_where_it_agrees():
    large = _prediction(4 * L, 0.53, 0.52, mass_correction=MAX_MASS_CORRECTION + 0.05)
    status = prediction_status({4 * L: large}, [_report(4 * L, 0.53, 0.52)], L, VERDICT)
    assert not status.trusted and "second-order" in status.reason


def test_keys_past_the_headroom_beyond_those_drawn_are_untrusted():
    many = _prediction(4 * L, 0.53, 0.52, clamped_keys=DOMINANT_KEYS + 1)
    few = _prediction(4 * L, 0.53, 0.52, clamped_keys=DOMINANT_KEYS)
    report = [_report(4 * L, 0.53, 0.52)]
    assert not prediction_status({4 * L: many}, report, L, VERDICT).trusted
    assert prediction_status({4 * L: few}, report, L, VERDICT).trusted


def test_every_run_without_a_predicted_horizon_gets_a_reason():
    none_at_train = Horizon(None, L, 4096)
    untrusted = prediction_status({L: _prediction(L, 0.82, 1.0)}, [], L, VERDICT)
    reason = horizon_reason(none_at_train, None, True, untrusted, VERDICT)
    assert "below 0.9 already at the training length" in reason and "although the run learned" in reason
    assert "not trusted" in reason
    assert horizon_reason(None, "not computed here: over budget", True, None, VERDICT) == "not computed here: over budget"
    assert "closed-form" in horizon_reason(None, None, False, None, VERDICT)
    assert horizon_reason(Horizon(40, 41, 4096), None, True, untrusted, VERDICT) is None

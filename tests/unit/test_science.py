"""The paper's claims at the default config, measured on the CPU (docs/science.md §1: C1, C3–C7).

Each default run is trained once per session (tests/unit/conftest.py). Margins are the ones the
product promises; if one fails, report the numbers rather than loosen it.
"""

from __future__ import annotations

import pytest
import torch

from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.fit import LAW_TOLERANCE, fit_dilution
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.encodings import LengthError
from lengen_core.training import train

DEFAULT = RunConfig()
L_TRAIN, OFFSET, V = DEFAULT.task.train_length, DEFAULT.task.offset, DEFAULT.task.vocab_size
DILUTION_LENGTHS = [L_TRAIN * 2**i for i in range(7)]  # 16 … 1024: 1× to 64×


@pytest.fixture(scope="module")
def rope_measured(rope):
    return evaluate(rope.model, rope.config, DILUTION_LENGTHS, samples=2048)


# --- C1, C4, C7: who extrapolates ----------------------------------------------------------------


def test_rope_is_exact_in_range_and_extrapolates_to_four_times(rope):
    at_train, at_four = evaluate(rope.model, rope.config, [L_TRAIN, 4 * L_TRAIN], samples=1024)
    assert at_train.accuracy >= 0.99
    assert at_four.accuracy >= 0.95


def test_learned_positions_fit_in_range_and_pin_beyond_it(learned):
    in_range, *beyond = evaluate(
        learned.model, learned.config, [L_TRAIN, 2 * L_TRAIN, 4 * L_TRAIN, 8 * L_TRAIN], samples=1024
    )
    assert in_range.accuracy >= 0.99
    for report in beyond:
        assert report.accuracy <= 2 / V, report
        assert report.argmax_key == L_TRAIN - 1 - OFFSET, report  # pinned inside the training range (C4)
        assert report.argmax_share >= 0.5, report


def test_rope_with_linear_attention_fits_in_range_then_collapses(rope_linear):
    """C7 as a claim about a model that did fit something: well above chance at the training length
    (measured 0.81), then most of it lost by 4× (0.23) and near chance by 16× (0.11; chance 0.0625).
    A model that never learned (≈ chance everywhere) fails the first assertion."""
    at_train, at_four, at_sixteen = evaluate(
        rope_linear.model, rope_linear.config, [L_TRAIN, 4 * L_TRAIN, 16 * L_TRAIN], samples=2048
    )
    assert at_train.accuracy >= 0.7
    assert at_four.accuracy <= 0.5 * at_train.accuracy
    assert at_sixteen.accuracy <= 1 / V + 0.08


# --- C3, C5: the carrier ---------------------------------------------------------------------------


def test_the_rope_carrier_peaks_at_the_offset(rope):
    carrier = extract_carrier(rope.model, rope.config, search_length=4_096)
    assert carrier.argmax_offset == OFFSET
    assert carrier.alignment
    assert carrier.margin >= 2.0  # measured 2.3 nats (2.8 at the old default); the alignment threshold is 1
    assert not carrier.baseline.aligned and carrier.baseline.argmax_offset != OFFSET  # training put it there


# --- C6: the dilution law ----------------------------------------------------------------------------


def test_the_prediction_from_the_weights_matches_the_measurement(rope, rope_measured):
    predicted = predict(rope.model, rope.config, DILUTION_LENGTHS)
    for prediction, measured in zip(predicted, rope_measured, strict=True):
        assert prediction.length == measured.length
        assert abs(prediction.accuracy - measured.accuracy) <= 0.05, (prediction, measured)
        assert abs(prediction.target_mass - measured.target_mass) <= 0.08, (prediction, measured)


def test_the_fitted_law_describes_the_measured_target_mass(rope, rope_measured):
    """The law fitted to p at 1× … 64× (2,048 samples each): p(L_train) and every point within 10%
    (measured 0.08 at the old default), m_out near the 7.0 measured to 1,024 (5.3 at the old default), with a narrow interval."""
    result = fit_dilution([r.length for r in rope_measured], [r.target_mass for r in rope_measured],
                          [r.target_mass_sem for r in rope_measured], L_TRAIN, V, rope.verdict)
    assert result.status == "fitted"
    fit = result.fit
    assert fit.points == len(DILUTION_LENGTHS)
    assert fit.max_relative_error <= LAW_TOLERANCE
    assert fit.target_mass([L_TRAIN])[0] == pytest.approx(rope_measured[0].target_mass, rel=0.08)
    assert 6.6 <= fit.m_out <= 7.5  # measured 7.10 here; 5.3 at the old default (d_model 64, qk_init 1.0)
    assert fit.m_out_low <= fit.m_out <= fit.m_out_high and fit.m_out_high - fit.m_out_low <= 0.3


def test_target_mass_dilutes_with_length(rope_measured):
    masses = [report.target_mass for report in rope_measured]
    assert masses == sorted(masses, reverse=True)
    assert masses[0] > 0.5 > masses[-1]


# --- Reproducibility ---------------------------------------------------------------------------------


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[name], sb[name]) for name in sa)


def test_training_is_deterministic(rope):
    again = train(DEFAULT, "cpu")
    assert _same_weights(again.model, rope.model)
    assert again.history == rope.history
    assert again.steps == rope.steps


def test_different_seeds_give_different_runs():
    first = train(with_changes(DEFAULT, steps=20), "cpu")
    second = train(with_changes(DEFAULT, steps=20, seed=1), "cpu")
    assert not _same_weights(first.model, second.model)
    assert first.history["loss"] != second.history["loss"]


def test_training_leaves_the_global_rng_alone():
    torch.manual_seed(2024)
    before = torch.get_rng_state()
    train(with_changes(DEFAULT, steps=20), "cpu")
    assert torch.equal(torch.get_rng_state(), before)


# --- Limits ---------------------------------------------------------------------------------------------


def test_learned_positions_beyond_the_table_are_a_length_error(learned):
    limit = learned.config.model.max_positions
    (report,) = evaluate(learned.model, learned.config, [limit], samples=8)  # the last row still works
    assert report.length == limit
    with pytest.raises(LengthError, match=f"length {limit + 1} is beyond the learned position table.*up to {limit}"):
        evaluate(learned.model, learned.config, [L_TRAIN, limit + 1], samples=8)


def test_a_sweep_too_large_is_refused_before_any_work(rope):
    from lengen_core.analysis.sequence import evaluate_sequence
    from lengen_core.config import MAX_SWEEP_LENGTHS, MAX_SWEEP_TOKENS

    many = list(range(OFFSET + 1, OFFSET + 2 + MAX_SWEEP_LENGTHS))
    with pytest.raises(LengthError, match=f"{len(many)} lengths in one request; the limit is {MAX_SWEEP_LENGTHS}"):
        evaluate(rope.model, rope.config, many, samples=1)
    with pytest.raises(LengthError, match=f"the limit is {MAX_SWEEP_TOKENS:,} .*use fewer samples"):
        evaluate(rope.model, rope.config, [1 << 20, 1 << 20], samples=1024 + 1)  # just over 2^31 tokens
    with pytest.raises(LengthError, match="lengths in one request"):
        evaluate_sequence(rope.model, rope.config, many, samples=1)
    with pytest.raises(LengthError, match="lengths in one request"):
        predict(rope.model, rope.config, many)
    with pytest.raises(LengthError, match="beyond the evaluation limit"):
        predict(rope.model, rope.config, [(1 << 20) + 1])
    (report,) = evaluate(rope.model, rope.config, [L_TRAIN], samples=4)  # a small sweep still runs
    assert report.length == L_TRAIN

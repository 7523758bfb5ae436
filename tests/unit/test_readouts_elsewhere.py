"""The readouts separate what they should on a config no other test uses (offset 5, training length
20, V 12, seed 4): RoPE from learned positions, from its untrained initialisation, and from a head
that never learned. Nothing here is tuned to the defaults."""

from __future__ import annotations

import pytest

from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.fit import fit_dilution
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train

ELSEWHERE = with_changes(RunConfig(), offset=5, train_length=20, vocab_size=12, seed=4)
LENGTHS = [20 * 2**i for i in range(8)]  # 1× … 128×, inside a learned table's 4,096 rows


@pytest.fixture(scope="module")
def runs():
    return {encoding: train(with_changes(ELSEWHERE, encoding=encoding), "cpu") for encoding in ("rope", "learned", "nope")}


def readouts(run):
    reports = evaluate(run.model, run.config, LENGTHS, samples=512)
    fit = fit_dilution(LENGTHS, [r.target_mass for r in reports], [r.target_mass_sem for r in reports],
                       run.config.task.train_length, run.config.task.vocab_size, run.verdict)
    return reports, fit, extract_carrier(run.model, run.config, search_length=4_096)


@pytest.mark.slow
def test_rope_learned_extrapolates_and_has_an_aligned_low_rank_carrier(runs):
    run = runs["rope"]
    reports, fit, found = readouts(run)
    assert run.verdict.learned and run.verdict.at_chance_beyond is False
    assert reports[2].accuracy >= 0.9  # 4×
    assert fit.status == "fitted" and fit.fit.holds and fit.fit.m_out > 0  # measured 0.06
    assert found.alignment and found.argmax_offset == 5
    assert not found.baseline.aligned
    assert found.effective_rank < found.baseline.effective_rank


@pytest.mark.slow
def test_learned_positions_learned_in_range_pin_beyond_and_get_no_law(runs):
    run = runs["learned"]
    reports, fit, found = readouts(run)
    assert run.verdict.learned and run.verdict.at_chance_beyond is True
    assert all(r.accuracy <= 2 / 12 for r in reports[1:])
    assert (fit.status, fit.fit) == ("at_chance", None)
    assert not found.alignment
    assert found.baseline.toeplitz_fraction - found.toeplitz_fraction >= 0.3  # training broke equivariance


@pytest.mark.slow
def test_a_nope_head_never_learned_and_no_readout_says_otherwise(runs):
    run = runs["nope"]
    _, fit, found = readouts(run)
    assert not run.verdict.learned
    assert (fit.status, fit.fit) == ("not_learned", None)
    assert not found.alignment
    assert found.toeplitz_fraction >= 0.9  # equivariant, yet nothing learned: why Toeplitz alone says nothing

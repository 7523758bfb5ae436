"""The fitted dilution law: fitted to p in relative error, with an interval and a goodness figure
that tells a good fit from a bad one, and no law where the verdict says there is nothing to fit."""

from __future__ import annotations

import numpy as np
import pytest

from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.fit import LAW_TOLERANCE, MIN_LENGTHS, fit_dilution, weighted_key_count

L_TRAIN = 16
V = 16
WIDE = 10**6  # a vocabulary so large that the 2/V floor keeps every synthetic point
LENGTHS = [L_TRAIN * 2**i for i in range(12)]  # 16 … 32,768


def law(n, a, m_out):
    return 1 / (a + (np.asarray(n, dtype=float) - L_TRAIN) * np.exp(-m_out))


def test_exact_law_data_give_back_its_parameters():
    masses = law(LENGTHS, 1.15, 5.0)
    result = fit_dilution(LENGTHS, masses, np.zeros(len(LENGTHS)), L_TRAIN, WIDE)
    assert result.status == "fitted"
    fit = result.fit
    assert fit.m_out == pytest.approx(5.0, abs=1e-6)
    assert fit.inverse_mass_at_train == pytest.approx(1.15, rel=1e-6)
    assert fit.max_relative_error < 1e-6 and fit.holds
    assert fit.points == len(LENGTHS) and fit.longest == LENGTHS[-1]
    assert "more than" not in result.reason


def test_the_fit_minimises_the_largest_relative_error():
    """The fit is the minimax one: on data the law cannot follow (1/p rising faster for a while), no
    (a, m_out) on a fine grid has a smaller largest error, and its error is spread over at least three
    points (the equioscillation of a two-parameter minimax fit), unlike a least-squares fit's."""
    n = np.asarray(LENGTHS[:8], dtype=float)
    masses = 1 / (1.1 + (n - L_TRAIN) * np.exp(-5.0) + 2 * np.exp(-5.0) * np.clip(n - 64, 0, 64))
    fit = fit_dilution(n, masses, None, L_TRAIN, WIDE).fit
    a, m = np.meshgrid(np.linspace(1.0, 1.6, 601), np.linspace(4.5, 5.5, 1001), indexing="ij")
    grid = 1 / (a[..., None] + (n - L_TRAIN) * np.exp(-m[..., None]))
    best_on_grid = np.abs(grid / masses - 1).max(axis=-1).min()
    assert fit.max_relative_error <= best_on_grid + 1e-4
    errors = np.abs(fit.target_mass(n) / masses - 1)
    assert np.sum(errors >= fit.max_relative_error - 1e-4) >= 3


def test_a_run_the_law_cannot_follow_is_told_so_and_where():
    """Keys between 64 and 128 weigh 6× the far average (a rise of the carrier there, as measured on
    runs away from the defaults): no two-parameter law gets within 10%, and the reason names the
    stretch from the measured points."""
    n = np.asarray(LENGTHS[:8], dtype=float)
    masses = 1 / (1.1 + (n - L_TRAIN) * np.exp(-5.0) + 5 * np.exp(-5.0) * np.clip(n - 64, 0, 64))
    result = fit_dilution(n, masses, None, L_TRAIN, WIDE)
    assert result.fit.max_relative_error > LAW_TOLERANCE and not result.fit.holds
    assert "does not describe this run" in result.reason
    assert "Between L = 64 and 128" in result.reason


@pytest.mark.slow  # many simulated fits; the fits of trained runs stay fast
def test_the_interval_covers_the_truth_under_sampling_noise():
    """Noise of 4% per point (the default run's level at long lengths): the 95% interval covers the
    true m_out in most of 20 noisy data sets, and is not absurdly wide."""
    stream = np.random.default_rng(3)
    covered, widths = 0, []
    for _ in range(20):
        truth = law(LENGTHS, 1.1, 4.0)
        sems = 0.04 * truth
        result = fit_dilution(LENGTHS, truth + sems * stream.standard_normal(len(truth)), sems, L_TRAIN, WIDE)
        covered += result.fit.m_out_low <= 4.0 <= result.fit.m_out_high
        widths.append(result.fit.m_out_high - result.fit.m_out_low)
    assert covered >= 16
    assert 0.005 < np.median(widths) < 0.2


def test_the_fitted_mass_at_the_training_length_never_exceeds_one():
    """Data whose near points a free line would extrapolate to p(L_train) > 1."""
    masses = np.minimum(law(LENGTHS, 0.7, 3.0), 0.999)
    result = fit_dilution(LENGTHS, masses, None, L_TRAIN, WIDE)
    assert result.fit.inverse_mass_at_train >= 1.0
    assert result.fit.target_mass([L_TRAIN])[0] <= 1.0


def test_the_long_lengths_do_not_decide_the_fit():
    """Lengths to 2^20 with 4% sampling noise (the default run's level): the fit keeps p(L_train)
    within a few percent; a least-squares line through 1/p (the old fit) is decided by the longest
    lengths, where 1/p is in the thousands, and misses p(L_train) by far more."""
    lengths = [L_TRAIN * 2**i for i in range(17)]
    truth = law(lengths, 1.12, 5.3)
    masses = truth * (1 + 0.04 * np.random.default_rng(7).standard_normal(len(truth)))
    result = fit_dilution(lengths, masses, 0.04 * masses, L_TRAIN, V)
    _slope, intercept = np.polyfit(np.asarray(lengths) - L_TRAIN, 1 / masses, 1)
    line_error = abs(1 / intercept / masses[0] - 1) if intercept > 0 else np.inf
    fit_error = abs(result.fit.target_mass([L_TRAIN])[0] / masses[0] - 1)
    assert fit_error < 0.1
    assert line_error > 0.3
    assert result.fit.max_relative_error < 0.15
    assert result.fit.m_out_low <= 5.3 <= result.fit.m_out_high


def test_too_few_points_is_no_fit():
    result = fit_dilution([8, 16, 32], [0.9, 0.8, 0.7], None, L_TRAIN, V)  # 8 is inside the training range
    assert result.status == "too_few_points" and result.fit is None
    assert str(MIN_LENGTHS) in result.reason


def test_three_lengths_quote_no_interval_and_say_why():
    """Three lengths pin two parameters but leave no shorter window to refit on: the interval 'with the lengths
    fitted' would be the answers' alone under another name. No law is quoted, and the reason says so; a fourth
    length gives one."""
    masses = law(LENGTHS[:4], 1.1, 5.0)
    sems = 0.01 * masses
    three = fit_dilution(LENGTHS[:3], masses[:3], sems[:3], L_TRAIN, WIDE)
    assert (three.status, three.fit) == ("too_few_points", None)
    assert "no shorter window to refit" in three.reason and "no interval can be quoted" in three.reason
    four = fit_dilution(LENGTHS[:4], masses, sems, L_TRAIN, WIDE)
    assert four.status == "fitted" and four.fit.quoted_low <= 5.0 <= four.fit.quoted_high


def test_no_law_for_a_run_that_did_not_learn_or_sits_at_chance(rope_linear, learned):
    lengths = [16, 32, 64, 128]
    for run, status in ((rope_linear, "not_learned"), (learned, "at_chance")):
        reports = evaluate(run.model, run.config, lengths, samples=256)
        result = fit_dilution(lengths, [r.target_mass for r in reports], [r.target_mass_sem for r in reports],
                              L_TRAIN, V, run.verdict)
        assert (result.status, result.fit) == (status, None)
        assert result.reason.startswith("No law")


def test_the_law_is_fitted_only_where_p_exceeds_two_over_v():
    masses = law(LENGTHS, 1.1, 5.0)  # p falls below 2/16 past 1,024
    result = fit_dilution(LENGTHS, masses, None, L_TRAIN, V)
    kept = [n for n, p in zip(LENGTHS, masses, strict=True) if p > 2 / V]
    assert result.fit.points == len(kept) < len(LENGTHS)
    assert result.fit.longest == kept[-1]


def test_the_goodness_figure_separates_rope_from_learned_positions(rope, learned):
    """RoPE's law holds within 10% where it applies (measured 0.079–0.083 at 256–2,048 samples: the
    worst point is the step of p between 4× and 8×, which no two-parameter law follows). Learned positions' p falls below 2/V at the first
    length past training, so no law is fitted; forced onto every point, their 'law' misses by more
    than 50% somewhere (R² gave 0.96 for it)."""
    lengths = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    fits = {}
    for name, run in (("rope", rope), ("learned", learned)):
        reports = evaluate(run.model, run.config, lengths, samples=1024)
        masses, sems = [r.target_mass for r in reports], [r.target_mass_sem for r in reports]
        fits[name] = fit_dilution(lengths, masses, sems, L_TRAIN, V), fit_dilution(lengths, masses, sems, L_TRAIN, WIDE)
    assert fits["rope"][0].fit.max_relative_error <= LAW_TOLERANCE and fits["rope"][0].fit.holds
    assert fits["learned"][0].status == "too_few_points"
    assert fits["learned"][1].fit.max_relative_error >= 0.5  # measured 0.67


def _bumped(n):
    """1/p with keys between 64 and 128 weighing 6× the far average (the carrier rising there)."""
    n = np.asarray(n, dtype=float)
    return 1.1 + (n - L_TRAIN) * np.exp(-5.0) + 5 * np.exp(-5.0) * np.clip(n - 64, 0, 64)


def test_a_flat_carrier_counts_every_far_key_once():
    """A prediction whose 1/p̂ is a straight line in n (every far key weighs the same) gives the key
    count n − L_train exactly, so the weighted fit is the uniform one."""
    n = np.asarray(LENGTHS[:9], dtype=float)
    predicted = {int(x): float(p) for x, p in zip(n, law(n, 1.3, 4.0), strict=True)}
    assert weighted_key_count(n, predicted, L_TRAIN) == pytest.approx(n - L_TRAIN, rel=1e-9)
    masses = law(n, 1.15, 5.0)
    weighted = fit_dilution(n, masses, None, L_TRAIN, WIDE, predicted_masses=predicted).fit
    uniform = fit_dilution(n, masses, None, L_TRAIN, WIDE).fit
    assert weighted.weighted and not uniform.weighted
    assert weighted.m_out == pytest.approx(uniform.m_out, abs=1e-4) == pytest.approx(5.0, abs=1e-4)


def test_keys_counted_by_their_weight_follow_a_bump_the_uniform_law_cannot():
    """The bump of test_a_run_the_law_cannot_follow_is_told_so_and_where, predicted from the weights
    with another overall scale (the prediction's own p̂): counted by weight, the law follows the
    measured p closely, m_out is the far keys' average margin, and the reason says what counting
    each key once would have missed."""
    n = np.asarray(LENGTHS[:8], dtype=float)
    masses = 1 / _bumped(n)
    predicted = {int(x): 1 / (1.4 + 1.3 * (inv - 1.1)) for x, inv in zip(n, _bumped(n), strict=True)}
    result = fit_dilution(n, masses, None, L_TRAIN, WIDE, predicted_masses=predicted)
    fit = result.fit
    assert fit.weighted and fit.holds and fit.max_relative_error < 1e-4
    assert fit.uniform_max_relative_error > LAW_TOLERANCE
    assert "counted one each, the law misses by up to" in result.reason
    average = (_bumped(n[-1]) - 1.1) / (n[-1] - L_TRAIN)  # 1/p rises by this per far key on average
    assert fit.m_out == pytest.approx(-np.log(average), abs=1e-3)
    between = np.array([80, 96, 200])  # drawn between the measured lengths: linear in n there
    assert np.all(np.diff(fit.target_mass(between)) < 0)


def test_without_a_prediction_at_the_training_length_every_key_counts_one():
    n = np.asarray(LENGTHS[1:8], dtype=float)  # 32 … 2,048: L_train itself not predicted
    predicted = {int(x): float(p) for x, p in zip(n, 1 / _bumped(n), strict=True)}
    assert weighted_key_count(n, predicted, L_TRAIN) is None
    assert not fit_dilution(n, 1 / _bumped(n), None, L_TRAIN, WIDE, predicted_masses=predicted).fit.weighted


def test_the_key_count_is_a_count():
    """A prediction whose p̂ wobbles up once (sampling of the expectation) still gives a count that
    starts at 0, never falls, and ends at longest − L_train."""
    n = np.asarray([16, 32, 64, 128, 256], dtype=float)
    predicted = {16: 0.9, 32: 0.8, 64: 0.82, 128: 0.6, 256: 0.4}
    count = weighted_key_count(n, predicted, L_TRAIN)
    assert count[0] == 0.0 and count[-1] == pytest.approx(256 - L_TRAIN)
    assert np.all(np.diff(count) >= 0)


# --- a law that can say "no law" (issue 27, finding 1) -----------------------------------------------------


@pytest.mark.parametrize("shape", ["rising", "flat", "flat at 1", "rising within noise"])
def test_a_p_that_does_not_fall_is_never_fitted(shape):
    """p rising with length (a rule such as log-n), flat, or at 1 (a constructed head) has no dilution and no
    finite m_out: the old fit answered `fitted`, with m_out wherever the optimiser stopped and an interval of
    zero width. The answer is `no_dilution`, with the numbers in its reason."""
    n = np.asarray(LENGTHS[:8], dtype=float)
    masses, sems = {
        "rising": (0.87 + 0.09 * np.log2(n / L_TRAIN) / 7, np.full(8, 0.003)),
        "flat": (np.full(8, 0.6), np.full(8, 0.01)),
        "flat at 1": (np.full(8, 0.9998), np.zeros(8)),
        "rising within noise": (0.6 - 0.004 * np.log2(n / L_TRAIN) / 7, np.full(8, 0.01)),
    }[shape]
    for predicted in (None, {int(x): float(law([x], 1.1, 5.0)[0]) for x in n}):
        result = fit_dilution(n, masses, sems, L_TRAIN, WIDE, predicted_masses=predicted)
        assert (result.status, result.fit) == ("no_dilution", None), result.reason
        assert result.reason.startswith("No law: p does not fall") and f"{int(n[-1]):,}" in result.reason


def test_a_falling_p_within_noise_of_no_fall_says_so_with_its_standard_errors():
    n = np.asarray(LENGTHS[:6], dtype=float)
    masses = np.linspace(0.60, 0.59, 6)
    assert fit_dilution(n, masses, np.full(6, 0.001), L_TRAIN, WIDE).status == "fitted"  # 0.01 is 7 errors
    result = fit_dilution(n, masses, np.full(6, 0.01), L_TRAIN, WIDE)
    assert result.status == "no_dilution" and "within 3.5 standard errors (0.0495)" in result.reason


def test_a_fit_that_does_not_pin_m_out_is_not_a_law():
    """m_out at an end of the range searched, or an interval of zero width over answers that vary (the
    constructed head's 35.04 [35.04, 35.04]), is `no_dilution`; a zero width from exact data is not."""
    from lengen_core.analysis.fit import M_OUT_BOUNDS, DilutionFit, _unpinned

    varied, exact = np.full(4, 0.01), np.zeros(4)
    at_bound = DilutionFit(16, 1.0, M_OUT_BOUNDS[1], 59.0, M_OUT_BOUNDS[1], 0.0, 4, 128, 16)
    assert "the end of the range searched" in _unpinned(at_bound, varied)
    flat = DilutionFit(16, 1.0, 35.04, 35.04, 35.04, 0.0, 4, 128, 16)
    assert "zero width" in _unpinned(flat, varied) and "35.04" in _unpinned(flat, varied)
    assert _unpinned(flat, exact) is None
    assert _unpinned(DilutionFit(16, 1.1, 5.0, 4.9, 5.1, 0.0, 4, 128, 16), varied) is None


# --- both laws, and an interval that can be quoted (issue 27, findings 1 and 2) --------------------------


def test_the_plain_law_is_reported_beside_the_weighted_one():
    n = np.asarray(LENGTHS[:8], dtype=float)
    masses = 1 / _bumped(n)
    sems = 0.01 * masses
    predicted = {int(x): 1 / (1.4 + 1.3 * (inv - 1.1)) for x, inv in zip(n, _bumped(n), strict=True)}
    weighted = fit_dilution(n, masses, sems, L_TRAIN, WIDE, predicted_masses=predicted).fit
    plain = fit_dilution(n, masses, sems, L_TRAIN, WIDE).fit
    assert weighted.weighted and not plain.weighted and plain.plain is None
    assert weighted.plain == plain and weighted.plain_law == plain and plain.plain_law is plain
    assert weighted.uniform_max_relative_error == plain.max_relative_error > LAW_TOLERANCE > weighted.max_relative_error
    assert "weight" in weighted.key_count_used and "n - L_train" in plain.key_count_used
    data = weighted.to_dict()
    assert data["plain"]["m_out"] == plain.m_out and data["plain"]["key_count"] == plain.key_count_used
    assert data["key_count"] == weighted.key_count_used and data["plain"]["plain"] is None
    import dataclasses
    import json

    from lengen_core.analysis.fit import DilutionFit
    json.dumps(data)
    assert DilutionFit.from_dict(dataclasses.asdict(weighted)) == weighted == DilutionFit.from_dict(data)


def _bent(n):
    """1/p bending upward: the law's m_out fitted to shorter windows is larger than to the whole."""
    n = np.asarray(n, dtype=float)
    return 1 / (1.1 + (n - L_TRAIN) * np.exp(-5.0) * (1 + 0.03 * np.log2(n / L_TRAIN)))


def test_m_outs_interval_holds_the_fits_to_fewer_lengths():
    """Fitted up to 128, 1,024 and 8,192 tokens, m_out moves by more than its answers' interval (as a real
    RoPE run did: 7.77, 7.20, 7.52, intervals ±0.04 that do not overlap). The interval with the lengths fitted
    contains every windowed fit's m_out; the answers' interval alone does not."""
    n = np.asarray(LENGTHS[:10], dtype=float)
    masses = _bent(n)
    sems = 0.002 * masses
    full = fit_dilution(n, masses, sems, L_TRAIN, WIDE).fit
    windows = [fit_dilution(n[n <= top], masses[n <= top], sems[n <= top], L_TRAIN, WIDE).fit.m_out
               for top in (128, 1024, 8192)]
    assert all(full.m_out_lengths_low <= m <= full.m_out_lengths_high for m in windows), (windows, full)
    assert not all(full.m_out_low <= m <= full.m_out_high for m in windows)
    assert full.quoted_low == full.m_out_lengths_low <= full.m_out_low <= full.m_out <= full.m_out_high


def test_the_largest_error_covers_every_point_the_law_is_drawn_at():
    """A measured point between L_train and the longest fitted length where p dips below 2/V is not fitted,
    but the law is drawn across it: its error counts in the 'fits within X%' figure. Measured exactly, p would
    then rise again past the dip, which no law follows (`not_monotone`); with standard errors of 0.12 the dip is
    within noise."""
    n = np.asarray(LENGTHS[:7], dtype=float)
    masses = law(n, 1.1, 5.2)  # 0.15 at 1,024
    masses[4] = 0.01  # at 256: below 2/V = 0.125
    assert fit_dilution(n, masses, None, L_TRAIN, V).status == "not_monotone"
    result = fit_dilution(n, masses, np.full(7, 0.12), L_TRAIN, V)
    assert result.fit.points == 6 and result.fit.longest == 1024
    assert result.fit.worst_length == 256 and result.fit.max_relative_error > 1 and not result.fit.holds


def test_the_vectorised_fit_matches_scipys_minimax():
    """The golden-section search gives the same minimax fit as SLSQP (the fit it replaced) to ~1e-8."""
    from scipy.optimize import minimize

    from lengen_core.analysis.fit import _minimax

    n = np.asarray(LENGTHS[:8], dtype=float)
    masses = 1 / (1.1 + (n - L_TRAIN) * np.exp(-5.0) + 2 * np.exp(-5.0) * np.clip(n - 64, 0, 64))
    a, m = _minimax(n - L_TRAIN, masses)

    def worst(theta):
        return np.max(np.abs(law(n, theta[0], theta[1]) / masses - 1))

    best = min((minimize(worst, start, method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-14,
                                                                       "maxiter": 20000}) for start in
                ([1.1, 5.0], [1.5, 4.0], [1.0, 6.0])), key=lambda s: s.fun)
    assert worst((a, m)) <= best.fun + 1e-9

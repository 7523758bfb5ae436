"""The dilution law fitted to measured target masses (the two-zone law of the dilution argument).

    1/p(n) = 1/p(L_train) + K(n)·e^{−m_out},   n ≥ L_train

Two parameters: a = 1/p(L_train) ≥ 1 and the effective margin m_out of the target over far keys.
K(n) counts the keys past the training length. Counted one each, K(n) = n − L_train, the textbook
two-zone law. But far keys do not all weigh the same: the carrier s(Δ) comes back up at some
distances, and on two of eleven trained RoPE runs no (a, m_out) then got within 10% of the measured
p (13% and 12%). Where the run's weights are at hand the fit counts each far key by its weight
instead (`weighted_key_count`): K(n) ∝ 1/p̂(n) − 1/p̂(L_train) from the prediction from the weights
(lengen_core.analysis.dilution), scaled so that K(longest) = longest − L_train. The shape of K comes from the
weights, never from the measurement; a and m_out are fitted to the measurement, and e^{−m_out} is
still the far keys' average weight relative to the target. On the same eleven runs the largest error
fell to 0.4–3.1% (docs/science.md, the fit). The uniform count's error is reported beside it.

How it is fitted, and why:
- **On p itself, in relative error.** The minimax fit: the parameters with the smallest largest
  relative error |p_fit − p| / p over the fitted lengths, every length weighing the same. A
  straight line through 1/p, as fitted before, is decided by the longest lengths, where 1/p is
  largest: on the default run it had R² 0.99999 while its p(L_train) was 0.44 against 0.886
  measured. Least squares on log p, tried next, spent its error unevenly (10.7% at its worst on the
  default run at 1,024 samples, where the minimax fit gets 8.3%).
- **a ≥ 1**: p(L_train) cannot exceed 1.
- **Uncertainty**: a parametric bootstrap over the evaluation samples. Each length's mean mass is
  redrawn from a normal with its standard error (the mean of ≥ 64 sequences), the law refitted, and
  the 2.5 and 97.5 percentiles of m_out over `BOOTSTRAP_DRAWS` refits are its 95% interval.
- **Goodness**: the largest relative error |p_fit − p| / p over the fitted points, and where.
  R² does not tell a good fit from a bad one here (a learned-position run had 0.96, NoPE
  0.9999999); this does. Within LAW_TOLERANCE (10%) the law describes the run (`DilutionFit.holds`);
  past it the reason says so, and where 1/p rose fastest per counted key.
- **Only where it means something**: no law for a run that did not learn its task, or that is at
  chance past its training length (lengen_core.analysis.verdict): `FitResult.status` says which, and `fit`
  is None.
- **Only where it applies**: at n ≥ L_train where the measured p exceeds `FLOOR_TIMES_CHANCE`/V,
  the regime where the target key's own mass decides the answer, and it is drawn only there. Past
  it p is a few thousandths, accuracy is near chance, and the two-zone form is an approximation that
  does not hold to 10%: RoPE's slowest frequencies (periods of ~10^4–10^5 tokens at base 10,000)
  keep far logits from averaging out, so 1/p bends. Fitted to every length up to 2^11× the training
  length on two configs besides the default, its largest error was 23% and 25%; fitted where
  p > 2/V, 6% on both.

What it is not: an accuracy model. The uniform-floor vote model fed with m_out over-predicts
accuracy badly (1.0 at L = 1024 where 0.26 was measured): m_out is an average margin, while
accuracy is decided by the few keys whose logit comes closest to the target's. The accuracy
prediction from the weights (lengen_core.analysis.dilution) models those keys; the fit does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lengen_core.analysis.verdict import Verdict

FitStatus = Literal["fitted", "not_learned", "at_chance", "too_few_points", "not_applicable"]
LAW = "1/p(n) = 1/p(L_train) + (n - L_train) * exp(-m_out)"
WEIGHTED_LAW = "1/p(n) = 1/p(L_train) + K(n) * exp(-m_out), K(n) = the keys past L_train counted by their weight"
BOOTSTRAP_DRAWS = 200
BOOTSTRAP_SEED = 0
MIN_POINTS = 3  # two parameters: at least one degree of freedom left to judge the fit by
FLOOR_TIMES_CHANCE = 2.0  # fitted where p > 2/V: the target key outweighs twice a token's average share
LAW_TOLERANCE = 0.10  # the law "describes" a run when every fitted point is within 10% of the measured p


@dataclass(frozen=True)
class DilutionFit:
    train_length: int
    inverse_mass_at_train: float  # fitted 1/p(L_train), ≥ 1
    m_out: float  # effective margin of the target over far keys (nats)
    m_out_low: float  # 95% bootstrap interval
    m_out_high: float
    max_relative_error: float  # max |p_fit − p| / p over the fitted points
    points: int  # measured lengths the law was fitted to (n ≥ L_train, p > 2/V)
    longest: int  # the longest of them: the law is drawn from L_train to here
    worst_length: int  # the fitted length where |p_fit − p| / p is largest
    key_lengths: tuple[int, ...] = ()  # where the weighted key count K(n) is known; () = every far key counts 1
    key_counts: tuple[float, ...] = ()  # K at those lengths: 0 at L_train, longest − L_train at the longest
    uniform_max_relative_error: float | None = None  # the same fit with every far key counted 1 (weighted fits)

    @property
    def weighted(self) -> bool:
        """Far keys counted by the weight the model gives them (from its weights), not one each."""
        return bool(self.key_lengths)

    @property
    def law(self) -> str:
        return WEIGHTED_LAW if self.weighted else LAW

    @property
    def holds(self) -> bool:
        """Every fitted point within LAW_TOLERANCE of the measured p."""
        return self.max_relative_error <= LAW_TOLERANCE

    @property
    def slope(self) -> float:
        """e^{−m_out}: the extra 1/p each extra (average) far key adds."""
        return math.exp(-self.m_out)

    def key_count(self, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
        """K(n): n − L_train, or the weighted count, linear in n between the lengths it is known at and
        one per key beyond them."""
        n = np.asarray(lengths, dtype=np.float64)
        if not self.weighted:
            return n - self.train_length
        knots, counts = np.asarray(self.key_lengths, dtype=np.float64), np.asarray(self.key_counts)
        inside = np.interp(n, knots, counts)
        return np.where(n > knots[-1], counts[-1] + n - knots[-1], np.where(n < knots[0], n - knots[0], inside))

    def target_mass(self, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
        return _law(self.key_count(lengths), self.inverse_mass_at_train, self.m_out)

    def drawn_at(self, lengths: Sequence[int]) -> list[float | None]:
        """The fitted p at each length it was fitted over (L_train … longest), None elsewhere."""
        return [float(self.target_mass([n])[0]) if self.train_length <= n <= self.longest else None for n in lengths]


@dataclass(frozen=True)
class FitResult:
    status: FitStatus
    fit: DilutionFit | None  # None unless status is "fitted"
    reason: str  # one sentence a person reads


NOT_APPLICABLE = FitResult(
    "not_applicable", None,
    "No law: it describes the last query of the single-head retrieval model, whose n keys share one softmax; "
    "a transformer's or a shift run's target mass averages queries at every position.",
)


def _law(far: np.ndarray, inverse_at_train: float, m_out: float) -> np.ndarray:
    """p at `far` far keys (the key count K(n); n − L_train when every far key weighs the same)."""
    return 1.0 / (inverse_at_train + far * np.exp(-m_out))


def _residuals(theta: np.ndarray, far: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """log p_fit − log p at each point (≈ the relative error)."""
    return -np.log(theta[0] + far * np.exp(-theta[1])) - log_p


def _least_squares(far: np.ndarray, log_p: np.ndarray, start: tuple[float, float]) -> np.ndarray:
    """(a, m_out) minimising Σ (log p_fit − log p)² with a ≥ 1: the starting point of the minimax fit."""
    from scipy.optimize import least_squares  # on first use: scipy takes 0.4 s to import, the app's first page none

    solution = least_squares(_residuals, np.asarray(start), bounds=([1.0, -30.0], [np.inf, 60.0]), method="trf",
                             args=(far, log_p))
    return solution.x


def _minimax(far: np.ndarray, p: np.ndarray, start: tuple[float, float]) -> np.ndarray:
    """(a, m_out) minimising the largest relative error max |p_fit/p − 1| with a ≥ 1, as the smooth
    problem min t subject to −t ≤ p_fit_i/p_i − 1 ≤ t (SLSQP), started from the least-squares fit in
    log p. Never worse than that start: if the solver stops early, the better of the two is kept."""
    from scipy.optimize import minimize

    theta0 = _least_squares(far, np.log(p), start)

    def errors(theta: np.ndarray) -> np.ndarray:
        return _law(far, theta[0], theta[1]) / p - 1.0

    def gaps(x: np.ndarray) -> np.ndarray:  # t − r_i ≥ 0 and t + r_i ≥ 0
        r = errors(x)
        return np.concatenate([x[2] - r, x[2] + r])

    def gaps_jacobian(x: np.ndarray) -> np.ndarray:
        scale = 1.0 / ((x[0] + far * np.exp(-x[1])) ** 2 * p)  # ∂r_i/∂a = −scale, ∂r_i/∂m_out = far·e^{−m}·scale
        j, ones = np.column_stack([-scale, far * np.exp(-x[1]) * scale]), np.ones((len(far), 1))
        return np.vstack([np.hstack([-j, ones]), np.hstack([j, ones])])

    def worst(theta: np.ndarray) -> float:
        return float(np.max(np.abs(errors(theta))))

    solution = minimize(lambda x: x[2], np.array([*theta0, worst(theta0)]), jac=lambda x: np.array([0.0, 0.0, 1.0]),
                        method="SLSQP", bounds=[(1.0, None), (-30.0, 60.0), (0.0, None)],
                        constraints=[{"type": "ineq", "fun": gaps, "jac": gaps_jacobian}],
                        options={"ftol": 1e-12, "maxiter": 200})
    theta = np.clip(solution.x[:2], [1.0, -30.0], [np.inf, 60.0])
    return theta if worst(theta) <= worst(theta0) else theta0


def _start(far: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """A starting point: 1/p at the shortest length, the slope of 1/p from the shortest to the longest."""
    a = max(1.0, 1.0 / p[0])
    rise = (1.0 / p[-1] - 1.0 / p[0]) / max(far[-1] - far[0], 1.0)
    return a, -math.log(rise) if rise > 0 else 10.0


def weighted_key_count(
    lengths: np.ndarray, predicted: Mapping[int, float] | None, train_length: int,
) -> np.ndarray | None:
    """K(n) at the sorted `lengths` (all ≥ L_train): the keys past L_train counted by the weight the
    model gives them, read off the prediction from the weights, p̂ (lengen_core.analysis.dilution):
    K(n) ∝ 1/p̂(n) − 1/p̂(L_train), scaled so that K(longest) = longest − L_train (the far keys'
    average weight is then e^{−m_out}, as in the uniform count) and made non-decreasing (a count).
    A flat carrier gives K(n) = n − L_train. None when p̂ is missing at one of the lengths or at
    L_train, or 1/p̂ does not rise: then every far key counts one."""
    if predicted is None or any(int(n) not in predicted for n in (train_length, *lengths)):
        return None
    inverse = np.array([1.0 / max(predicted[int(n)], 1e-300) for n in lengths])
    rise = inverse - 1.0 / max(predicted[train_length], 1e-300)
    if not np.all(np.isfinite(rise)) or rise[-1] <= 0.0 or lengths[-1] <= train_length:
        return None
    return np.maximum.accumulate(np.clip(rise, 0.0, None)) * (lengths[-1] - train_length) / rise[-1]


def fit_dilution(
    lengths: Sequence[int], target_masses: Sequence[float], target_mass_sems: Sequence[float] | None,
    train_length: int, vocab_size: int, verdict: Verdict | None = None,
    predicted_masses: Mapping[int, float] | None = None,
) -> FitResult:
    """The law fitted to the measured points at n ≥ L_train with p > 2/V (see the module docstring).
    With `predicted_masses` (the prediction's p̂ by length, L_train and every measured length) far
    keys are counted by their weight (`weighted_key_count`), else one each."""
    if verdict is not None and not verdict.learned:
        return FitResult("not_learned", None, f"No law: this run {verdict.reason}")
    if verdict is not None and verdict.at_chance_beyond:
        return FitResult("at_chance", None, "No law: this run is at chance past its training length "
                         f"({verdict.beyond_accuracy:.3f} at {verdict.beyond_length}), so there is no decay to fit.")
    n = np.asarray(lengths, dtype=np.float64)
    p = np.asarray(target_masses, dtype=np.float64)
    sems = np.zeros_like(p) if target_mass_sems is None else np.asarray(target_mass_sems, dtype=np.float64)
    floor = FLOOR_TIMES_CHANCE / vocab_size
    use = (n >= train_length) & (p > floor)
    if use.sum() < MIN_POINTS:
        return FitResult("too_few_points", None, f"No law: {int(use.sum())} measured lengths at or past the "
                         f"training length with p > 2/V = {floor:.3g}; the fit needs {MIN_POINTS}.")
    order = np.argsort(n[use])
    n, p, sems = n[use][order], p[use][order], sems[use][order]
    uniform = n - train_length
    weighted = weighted_key_count(n, predicted_masses, train_length)
    far = uniform if weighted is None else weighted
    a, m_out = _minimax(far, p, _start(far, p))
    stream = np.random.default_rng(BOOTSTRAP_SEED)
    draws = []
    for _ in range(BOOTSTRAP_DRAWS):
        resampled = np.clip(p + sems * stream.standard_normal(len(p)), p * 1e-3, 1.0)
        draws.append(_minimax(far, resampled, (a, m_out))[1])
    low, high = np.percentile(draws, [2.5, 97.5])
    errors = np.abs(_law(far, a, m_out) / p - 1.0)
    worst = int(np.argmax(errors))
    uniform_error = None
    if weighted is not None:
        theta = _minimax(uniform, p, _start(uniform, p))
        uniform_error = float(np.max(np.abs(_law(uniform, *theta) / p - 1.0)))
    fit = DilutionFit(train_length, float(a), float(m_out), float(min(low, m_out)), float(max(high, m_out)),
                      float(errors[worst]), len(n), int(n[-1]), int(n[worst]),
                      () if weighted is None else tuple(int(x) for x in n),
                      () if weighted is None else tuple(float(x) for x in weighted), uniform_error)
    reason = (f"m_out {m_out:.2f} (95% interval {fit.m_out_low:.2f} to {fit.m_out_high:.2f}); the fitted p is within "
              f"{fit.max_relative_error:.0%} of every measured point from {train_length} to {int(n[-1]):,}, the lengths "
              f"where p > 2/V = {floor:.3g} (where the law applies).")
    if weighted is not None:
        reason += (f" Far keys are counted by the weight the model gives them (read off its weights); counted one "
                   f"each, the law misses by up to {uniform_error:.0%}.")
    return FitResult("fitted", fit, reason if fit.holds else f"{reason} {_miss(n, p, far, fit)}")


def _miss(n: np.ndarray, p: np.ndarray, far: np.ndarray, fit: DilutionFit) -> str:
    """Why the law misses by more than LAW_TOLERANCE, from the measured points: where 1/p rose fastest per key."""
    rises = np.diff(1.0 / p) / np.maximum(np.diff(far), 1e-12)
    steepest = int(np.argmax(rises))
    times = rises[steepest] / fit.slope
    text = (f"That is more than {LAW_TOLERANCE:.0%}: the law does not describe this run closely (worst at L = "
            f"{fit.worst_length:,}).")
    if times < 1.5:
        return text + " 1/p bends where the law's is a straight line in the key count."
    counted = "counted by its weight" if fit.weighted else "added"
    return (text + f" Between L = {int(n[steepest]):,} and {int(n[steepest + 1]):,} each key {counted} raised 1/p by "
            f"{times:.1f}× the law's e^(−m_out): keys at those distances weigh more than far keys do on average, "
            "and a law with one far margin cannot follow that.")

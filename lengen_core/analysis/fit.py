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
fell to 0.4–3.1% (docs/science.md, the fit). The plain law (K = n − L_train) is fitted and reported
beside it (`DilutionFit.plain`).

How it is fitted, and why:
- **On p itself, in relative error.** The minimax fit: the parameters with the smallest largest
  relative error |p_fit − p| / p over the fitted lengths, every length weighing the same. A
  straight line through 1/p, as fitted before, is decided by the longest lengths, where 1/p is
  largest: on the default run it had R² 0.99999 while its p(L_train) was 0.44 against 0.886
  measured. Least squares on log p, tried next, spent its error unevenly (10.7% at its worst on the
  default run at 1,024 samples, where the minimax fit gets 8.3%).
- **a ≥ 1**: p(L_train) cannot exceed 1.
- **Uncertainty, two intervals**: (1) over the answers: a parametric bootstrap over the evaluation
  samples. Each length's mean mass is redrawn from a normal with its standard error (the mean of ≥ 64
  sequences), the law refitted, and the 2.5 and 97.5 percentiles of m_out over `BOOTSTRAP_DRAWS` refits
  are its 95% interval (`m_out_low`, `m_out_high`), the lengths held fixed. (2) With the lengths fitted
  (`m_out_lengths_low`, `m_out_lengths_high`, the one to quote): the answers' interval joined with m_out
  refitted to every shorter window from L_train (at least MIN_POINTS lengths) and with each length left
  out in turn (each window where p falls by the same test as the whole curve). Fitted up to 256, 2,048 and 8,192 tokens one RoPE run gave 7.77, 7.20 and 7.52, each with
  an answers' interval about ±0.04 wide: the answers' interval alone cannot be quoted as "m_out is known
  to ±0.04"; the second interval contains every shorter window's m_out by construction.
- **How it is solved**: every fit (the measured points, the redraws, the windows, for both key counts)
  in one vectorised search (`_minimax_many`): the problem is quasiconvex in (a, e^{−m_out}), so a
  golden-section search on m_out with the best a ≥ 1 for each m_out (by bisection) finds the minimax fit;
  it agrees with the SLSQP fit it replaced to ~1e-10 in m_out, at a seventh of its time.
- **Goodness**: the largest relative error |p_fit − p| / p over every measured point the law is drawn at
  (L_train … its longest fitted length), and where.
  R² does not tell a good fit from a bad one here (a learned-position run had 0.96, NoPE
  0.9999999); this does. Within LAW_TOLERANCE (10%) the law describes the run (`DilutionFit.holds`);
  past it the reason says so, and where 1/p rose fastest per counted key.
- **Only where p falls at every length** (lengen_core.analysis.trend): the law makes p fall everywhere, so the
  whole measured curve from L_train to the longest fitted length is read first, every pair of lengths compared
  in standard errors of the difference (TREND_SIGMAS, 3.5). Where p falls nowhere (`no_dilution`: a rule such
  as log-n can make p rise; a constructed head keeps p at 1) there is no dilution and no finite m_out; where it
  falls somewhere and rises elsewhere (`not_monotone`: log-n's 0.82 → 0.945 → 0.786) the law does not describe
  the run. Neither quotes an m_out. Once significant, a pair stays so when a longer length is asked on the same
  sequences, so the status does not flip with one more doubling where the shape was already seen (the first
  against the last length, the test before, gave `no_dilution` up to 2^15 and a law "within 7%" up to 2^16).
  Where the fit puts m_out at an end of M_OUT_BOUNDS, or its answers' interval has zero width although p has a
  spread, m_out is not pinned by the measurement: `no_dilution` too, with the reason.
- **Enough lengths to quote an interval** (`too_few_points`): MIN_LENGTHS (4) fitted lengths. With 3, two
  parameters leave one degree of freedom and no shorter window to refit on, so the interval with the lengths
  fitted would be the answers' alone, under another name: the answer says so and quotes none.
- **Which K(n)**: the weighted count is built from the same weights the prediction uses, so whether the
  weighted law holds mostly re-tests the prediction from the weights; the plain two-zone law (K = n −
  L_train, `DilutionFit.plain` beside a weighted fit) tests the two-zone form itself. Both are reported.
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

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lengen_core.analysis.trend import trend
from lengen_core.analysis.verdict import Verdict
from lengen_core.thresholds import LAW_TOLERANCE

FitStatus = Literal["fitted", "no_dilution", "not_monotone", "not_learned", "at_chance", "too_few_points",
                    "not_applicable", "not_asked"]
LAW = "1/p(n) = 1/p(L_train) + (n - L_train) * exp(-m_out)"
WEIGHTED_LAW = "1/p(n) = 1/p(L_train) + K(n) * exp(-m_out), K(n) = the keys past L_train counted by their weight"
PLAIN_KEYS = "n - L_train (every far key counted one)"
WEIGHTED_KEYS = "the far keys counted by the weight the model gives them (from its weights)"
BOOTSTRAP_DRAWS = 200
BOOTSTRAP_SEED = 0
MIN_POINTS = 3  # two parameters: at least one degree of freedom left to judge the fit by (a window's least)
MIN_LENGTHS = MIN_POINTS + 1  # a law quoted: its interval needs a shorter window of MIN_POINTS to refit on
FLOOR_TIMES_CHANCE = 2.0  # fitted where p > 2/V: the target key outweighs twice a token's average share
M_OUT_BOUNDS = (-30.0, 60.0)  # the range m_out is searched in: a fit at either end has no finite m_out


@dataclass(frozen=True)
class DilutionFit:
    train_length: int
    inverse_mass_at_train: float  # fitted 1/p(L_train), ≥ 1
    m_out: float  # effective margin of the target over far keys (nats)
    m_out_low: float  # 95% bootstrap interval over the answers (the evaluation samples), lengths fixed
    m_out_high: float
    max_relative_error: float  # max |p_fit − p| / p over every measured point the law is drawn at (L_train … longest)
    points: int  # measured lengths the law was fitted to (n ≥ L_train, p > 2/V)
    longest: int  # the longest of them: the law is drawn from L_train to here
    worst_length: int  # the measured length where |p_fit − p| / p is largest
    key_lengths: tuple[int, ...] = ()  # where the weighted key count K(n) is known; () = every far key counts 1
    key_counts: tuple[float, ...] = ()  # K at those lengths: 0 at L_train, longest − L_train at the longest
    m_out_lengths_low: float | None = None  # the answers' interval joined with m_out fitted to fewer lengths
    m_out_lengths_high: float | None = None  # (every shorter window from L_train, and each length left out)
    plain: DilutionFit | None = None  # a weighted fit's twin with K(n) = n − L_train (None: this one is plain)

    @property
    def weighted(self) -> bool:
        """Far keys counted by the weight the model gives them (from its weights), not one each."""
        return bool(self.key_lengths)

    @property
    def law(self) -> str:
        return WEIGHTED_LAW if self.weighted else LAW

    @property
    def key_count_used(self) -> str:
        """Which K(n) this law uses, in words."""
        return WEIGHTED_KEYS if self.weighted else PLAIN_KEYS

    @property
    def plain_law(self) -> DilutionFit:
        """The two-zone law with every far key counted one: this fit, or its plain twin."""
        return self if self.plain is None else self.plain

    @property
    def uniform_max_relative_error(self) -> float | None:
        """The plain law's largest error beside a weighted fit's (None for a plain fit)."""
        return None if self.plain is None else self.plain.max_relative_error

    @property
    def quoted_low(self) -> float:
        """The interval to quote: over the answers and the lengths fitted (the answers' alone where unknown)."""
        return self.m_out_low if self.m_out_lengths_low is None else self.m_out_lengths_low

    @property
    def quoted_high(self) -> float:
        return self.m_out_high if self.m_out_lengths_high is None else self.m_out_lengths_high

    @property
    def holds(self) -> bool:
        """Every point the law is drawn at within LAW_TOLERANCE of the measured p."""
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

    def to_dict(self) -> dict:
        """The JSON form: the fields, the law, which K(n) it uses, whether it holds, and the plain twin's."""
        fields = {key: value for key, value in vars(self).items() if key != "plain"}
        return {"law": self.law, "key_count": self.key_count_used, **fields, "holds": self.holds,
                "weighted": self.weighted, "tolerance": LAW_TOLERANCE,
                "uniform_max_relative_error": self.uniform_max_relative_error,
                "plain": None if self.plain is None else self.plain.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping) -> DilutionFit:
        """`dataclasses.asdict`'s inverse (and `to_dict`'s: its extra keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        found = {key: value for key, value in data.items() if key in names}
        found["key_lengths"] = tuple(found.get("key_lengths", ()))
        found["key_counts"] = tuple(found.get("key_counts", ()))
        found["plain"] = None if found.get("plain") is None else cls.from_dict(found["plain"])
        return cls(**found)


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

NOT_ASKED = FitResult(
    "not_asked", None,
    "No law here: it counts the far keys by the prediction's weights, and the prediction was not asked for.",
)


def _law(far: np.ndarray, inverse_at_train: float, m_out: float) -> np.ndarray:
    """p at `far` far keys (the key count K(n); n − L_train when every far key weighs the same)."""
    return 1.0 / (inverse_at_train + far * np.exp(-m_out))


GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
OUTER_STEPS = 56  # golden-section steps on m_out: its bracket of 90 nats shrinks to 90 × 0.618^56 ≈ 2e-10
INNER_STEPS = 44  # bisection steps on log a for each m_out: a bracket of at most ~10 shrinks to ~6e-13


def _worst_given_a(a: np.ndarray, shift: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest and smallest q_i/(a + shift_i), one row per fit."""
    ratio = q / (a[:, None] + shift)
    return ratio.max(axis=1), ratio.min(axis=1)


def _best_a(s: np.ndarray, far: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a slope s = e^{−m_out} per row, the a ≥ 1 with the smallest largest relative error, and that error.
    With x_i = a + K_i s the error is max(max q_i/x_i − 1, 1 − min q_i/x_i): the first term falls with a, the
    second rises, so the best a is where they meet (or 1), found by bisection (geometric: a spans decades)."""
    shift = far * s[:, None]
    high, low = _worst_given_a(np.ones_like(s), shift, q)
    at_one = high + low <= 2.0  # the terms already meet at or below a = 1
    lo, hi = np.zeros_like(s), np.log(np.maximum(q.max(axis=1), 1.0)) + 1e-12
    for _ in range(INNER_STEPS):
        mid = (lo + hi) / 2.0
        high, low = _worst_given_a(np.exp(mid), shift, q)
        above = high + low > 2.0  # a still too small
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    a = np.where(at_one, 1.0, np.exp(hi))
    high, low = _worst_given_a(a, shift, q)
    return a, np.maximum(high - 1.0, 1.0 - low)


def _minimax_many(far: np.ndarray, p: np.ndarray, use: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(a, m_out) per row minimising the largest relative error max |p_fit/p − 1| over the points in `use`,
    with a ≥ 1 and m_out in M_OUT_BOUNDS, for many fits at once (rows: bootstrap draws, windows of lengths).
    Exact up to the search's steps: the condition max |q_i/(a + K_i s) − 1| ≤ t is a set of linear inequalities
    in (a, s), so the problem is quasiconvex in (a, s), the best error for each s (`_best_a`) is unimodal in s,
    hence in m_out, and a golden-section search on m_out finds its minimum (ties go to the smaller m_out: where p
    is flat the error stops changing once e^{−m_out} is negligible). A point left out of a row is replaced by a
    copy of the row's first point in use, which changes neither its largest nor its smallest ratio."""
    p = np.atleast_2d(np.asarray(p, dtype=np.float64))
    far = np.array(np.broadcast_to(np.asarray(far, dtype=np.float64), p.shape))
    q = 1.0 / p
    if use is not None:
        use = np.broadcast_to(use, p.shape)
        first = np.argmax(use, axis=1)[:, None]
        q = np.where(use, q, np.take_along_axis(q, first, axis=1))
        far = np.where(use, far, np.take_along_axis(far, first, axis=1))
    lo, hi = np.full(len(p), M_OUT_BOUNDS[0]), np.full(len(p), M_OUT_BOUNDS[1])
    left, right = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    f_left, f_right = _best_a(np.exp(-left), far, q)[1], _best_a(np.exp(-right), far, q)[1]
    for _ in range(OUTER_STEPS):
        go_left = f_left <= f_right * (1.0 + 1e-12) + 1e-15
        hi, lo = np.where(go_left, right, hi), np.where(go_left, lo, left)
        moved = np.where(go_left, hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo))
        f_moved = _best_a(np.exp(-moved), far, q)[1]
        left, right, f_left, f_right = (np.where(go_left, moved, right), np.where(go_left, left, moved),
                                        np.where(go_left, f_moved, f_right), np.where(go_left, f_left, f_moved))
    m_out = np.where(f_left <= f_right, left, right)
    return _best_a(np.exp(-m_out), far, q)[0], m_out


def _minimax(far: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """One fit: (a, m_out) with the smallest largest relative error (`_minimax_many`)."""
    a, m_out = _minimax_many(far, p)
    return float(a[0]), float(m_out[0])


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


def _windows(points: int) -> list[np.ndarray]:
    """The subsets of the fitted lengths (as masks) m_out is refitted on to see how it depends on them: every
    shorter window from L_train with at least MIN_POINTS lengths, and each length left out in turn."""
    masks = [np.arange(points) < j for j in range(MIN_POINTS, points)]
    if points > MIN_POINTS:
        masks += [np.arange(points) != i for i in range(points)]
    return masks


def _law_rows(n: np.ndarray, p: np.ndarray, sems: np.ndarray, counts) -> tuple[np.ndarray, ...] | None:
    """The fits one law needs, as rows for `_minimax_many` (K, p, points in use): the measured points, then
    BOOTSTRAP_DRAWS redraws of p from its standard errors, then each window of fewer lengths (`_windows`)
    where p falls (lengen_core.analysis.trend, as for the whole curve), with the window's own K (a weighted count is scaled to the window's longest length).
    None when `counts` does not know K here."""
    far = counts(n)
    if far is None:
        return None
    stream = np.random.default_rng(BOOTSTRAP_SEED)
    draws = np.clip(p + sems * stream.standard_normal((BOOTSTRAP_DRAWS, len(p))), p * 1e-3, 1.0)
    fars, uses = [np.broadcast_to(far, (1 + BOOTSTRAP_DRAWS, len(n)))], [np.ones((1 + BOOTSTRAP_DRAWS, len(n)), bool)]
    for mask in _windows(len(n)):
        window = counts(n[mask])
        if window is not None and trend(n[mask], p[mask], sems[mask]).status == "falling":
            full = np.zeros(len(n))
            full[mask] = window
            fars.append(full[None])
            uses.append(mask[None])
    far_rows, use = np.vstack(fars), np.vstack(uses)
    return far_rows, np.vstack([p, draws, np.broadcast_to(p, (len(far_rows) - 1 - BOOTSTRAP_DRAWS, len(p)))]), use


def _law_from(n: np.ndarray, far: np.ndarray, a: np.ndarray, m: np.ndarray, weighted: bool, train_length: int,
              drawn: tuple[np.ndarray, np.ndarray]) -> DilutionFit:
    """One law from its rows' fits (`_law_rows`' order): m_out, the answers' 95% interval, that interval joined
    with the windows' m_out, and the largest error over the `drawn` measured points (L_train … longest)."""
    m_out = float(m[0])
    low, high = np.percentile(m[1:1 + BOOTSTRAP_DRAWS], [2.5, 97.5])
    low, high = float(min(low, m_out)), float(max(high, m_out))
    spread = m[1 + BOOTSTRAP_DRAWS:]
    law = DilutionFit(train_length, float(a[0]), m_out, low, high, 0.0, len(n), int(n[-1]), int(n[-1]),
                      tuple(int(x) for x in n) if weighted else (), tuple(float(x) for x in far) if weighted else (),
                      float(min(low, spread.min(initial=low))), float(max(high, spread.max(initial=high))))
    lengths, masses = drawn
    errors = np.abs(law.target_mass(lengths) / masses - 1.0)
    worst = int(np.argmax(errors))
    return dataclasses.replace(law, max_relative_error=float(errors[worst]), worst_length=int(lengths[worst]))


@dataclass(frozen=True)
class _PlainCounter:
    """K(n) = n − L_train."""

    train_length: int
    weighted = False

    def __call__(self, lengths: np.ndarray) -> np.ndarray:
        return np.asarray(lengths, dtype=np.float64) - self.train_length


@dataclass(frozen=True)
class _WeightedCounter:
    """K(n) from the prediction's p̂ (`weighted_key_count`), scaled to the longest of the lengths given."""

    predicted: Mapping[int, float]
    train_length: int
    weighted = True

    def __call__(self, lengths: np.ndarray) -> np.ndarray | None:
        return weighted_key_count(lengths, self.predicted, self.train_length)


def fit_dilution(
    lengths: Sequence[int], target_masses: Sequence[float], target_mass_sems: Sequence[float] | None,
    train_length: int, vocab_size: int, verdict: Verdict | None = None,
    predicted_masses: Mapping[int, float] | None = None,
) -> FitResult:
    """The law fitted to the measured points at n ≥ L_train with p > 2/V (see the module docstring), or
    `too_few_points` under MIN_LENGTHS of them, `no_dilution` where p does not fall or the fit would not pin
    m_out, `not_monotone` where p falls and rises (lengen_core.analysis.trend reads every point from L_train to
    the longest fitted length, the ones the law would be drawn over). With `predicted_masses` (the
    prediction's p̂ by length, L_train and every measured length) far keys are counted by their weight
    (`weighted_key_count`) and the plain law (n − L_train) is fitted beside it (`DilutionFit.plain`)."""
    if verdict is not None and not verdict.learned:
        return FitResult("not_learned", None, f"No law: this run {verdict.reason}")
    if verdict is not None and verdict.at_chance_beyond:
        return FitResult("at_chance", None, "No law: this run is at chance past its training length "
                         f"({verdict.beyond_accuracy:.3f} at {verdict.beyond_length}), so there is no decay to fit.")
    every_n = np.asarray(lengths, dtype=np.float64)
    every_p = np.asarray(target_masses, dtype=np.float64)
    every_sem = np.zeros_like(every_p) if target_mass_sems is None else np.asarray(target_mass_sems, np.float64)
    floor = FLOOR_TIMES_CHANCE / vocab_size
    use = (every_n >= train_length) & (every_p > floor)
    if use.sum() < MIN_LENGTHS:
        return FitResult("too_few_points", None, _too_few(int(use.sum()), floor))
    n, p, sems = _sorted(every_n[use], every_p[use], every_sem[use])
    inside = (every_n >= train_length) & (every_n <= n[-1])  # every measured point the law is drawn at
    drawn = (every_n[inside], every_p[inside])
    shape = trend(*_sorted(every_n[inside], every_p[inside], every_sem[inside]))  # the whole curve it is drawn over
    if shape.status != "falling":
        return FitResult(shape.status, None, shape.reason)
    counters = [_PlainCounter(train_length)]
    if predicted_masses is not None:
        counters.append(_WeightedCounter(predicted_masses, train_length))
    laws = [(counter, rows) for counter in counters if (rows := _law_rows(n, p, sems, counter)) is not None]
    a, m = _minimax_many(np.vstack([rows[0] for _, rows in laws]), np.vstack([rows[1] for _, rows in laws]),
                         np.vstack([rows[2] for _, rows in laws]))  # every fit of both laws in one search
    fits, start = [], 0
    for counter, rows in laws:
        end = start + len(rows[0])
        fits.append(_law_from(n, rows[0][0], a[start:end], m[start:end], counter.weighted, train_length, drawn))
        start = end
    plain = fits[0]
    fit = plain if len(fits) == 1 else dataclasses.replace(fits[1], plain=plain)
    if (why := _unpinned(fit, sems)) is not None:
        return FitResult("no_dilution", None, why)
    reason = (f"m_out {fit.m_out:.2f} (95% interval over the answers {fit.m_out_low:.2f} to {fit.m_out_high:.2f}; "
              f"{fit.quoted_low:.2f} to {fit.quoted_high:.2f} with the lengths fitted); the fitted p is within "
              f"{fit.max_relative_error:.0%} of every measured point from {train_length} to {int(n[-1]):,}, the "
              f"lengths where p > 2/V = {floor:.3g} (where the law applies).")
    if fit.plain is not None:
        reason += (f" Far keys are counted by the weight the model gives them (read off its weights); counted one "
                   f"each, the law misses by up to {plain.max_relative_error:.0%} (its m_out {plain.m_out:.2f}, "
                   f"K = n − L_train).")
    return FitResult("fitted", fit, reason if fit.holds else f"{reason} {_miss(n, p, fit)}")


def _sorted(*columns: np.ndarray) -> list[np.ndarray]:
    """The columns in the order of the first (the lengths)."""
    order = np.argsort(columns[0], kind="stable")
    return [column[order] for column in columns]


def _too_few(found: int, floor: float) -> str:
    """Why no law is quoted with fewer than MIN_LENGTHS lengths where it applies."""
    text = (f"No law: {found} measured length{'s' * (found != 1)} at or past the training length with p > 2/V = "
            f"{floor:.3g}; a law is quoted from {MIN_LENGTHS}.")
    if found == MIN_POINTS:
        text += (f" {MIN_POINTS} lengths pin its two parameters, but leave no shorter window to refit them on, so how "
                 "far the choice of lengths moves m_out is unknown and no interval can be quoted: ask for one more "
                 "length.")
    return text


def _unpinned(fit: DilutionFit, sems: np.ndarray) -> str | None:
    """Why the fit does not pin m_out (None when it does): m_out at an end of the range searched, or an
    interval of zero width although the measured p has a spread."""
    if min(abs(fit.m_out - bound) for bound in M_OUT_BOUNDS) < 1e-6:
        return (f"No law: the fit puts m_out at {fit.m_out:.2f}, the end of the range searched "
                f"({M_OUT_BOUNDS[0]:g} to {M_OUT_BOUNDS[1]:g}), so p does not pin a finite m_out.")
    if np.any(sems > 0) and fit.m_out_high - fit.m_out_low <= 1e-9 * max(1.0, abs(fit.m_out)):
        return (f"No law: m_out {fit.m_out:.2f} has an interval of zero width although the measured p varies "
                "from answer to answer: p barely depends on it, so the measurement does not pin m_out.")
    return None


def _miss(n: np.ndarray, p: np.ndarray, fit: DilutionFit) -> str:
    """Why the law misses by more than LAW_TOLERANCE, from the measured points: where 1/p rose fastest per key."""
    far = fit.key_count(n)
    rises = np.diff(1.0 / p) / np.maximum(np.diff(far), 1e-12)
    steepest = int(np.argmax(rises))
    times = rises[steepest] / fit.slope
    text = (f"That is more than {LAW_TOLERANCE:.0%}: the law does not describe this run closely (worst at L = "
            f"{fit.worst_length:,}).")
    if times < 1.5:
        return text + " 1/p bends where the law's is a straight line in the key count."
    counted = "counted by its weight" if fit.weighted else "added"
    factor = f"{times:.1f}×" if times < 1000 else "over 1,000×"  # a near-zero e^(−m_out) makes any rise huge
    return (text + f" Between L = {int(n[steepest]):,} and {int(n[steepest + 1]):,} each key {counted} raised 1/p by "
            f"{factor} the law's e^(−m_out): keys at those distances weigh more than far keys do on average, "
            "and a law with one far margin cannot follow that.")

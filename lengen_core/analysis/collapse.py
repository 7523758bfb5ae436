"""The data collapse of a sweep (docs/science.md §7): accuracy against the scaled length of the vote model.

With an ideal readout and many off-target keys, a run whose target beats the far keys by a margin
m answers right with probability

    A(n) = ∫ φ(z) Φ(z + c)^{V−1} dz,   c = e^m · √(V / (n − 1)),

so A depends on n, m and V only through c (and V's exponent). In the scaled length

    x = (n − 1) · e^{−2m} / V   (c = 1/√x)

every run of one vocabulary falls on one master curve A_V(x). Here m is each run's fitted far margin
m_out (lengen_core.analysis.fit). m_out is the far keys' *average* weight, and a RoPE head's far keys are not
all alike: a few near-recurrences weigh as much as the target, and they, not the average, take the
answer away. So the curve is also drawn with one scale fitted to every point at once, A_V(s·x): s
says how many times more far keys the runs behave as if they had (equivalently, an effective margin
m_out − ln(s)/2). `collapse` places the points and measures:

- `rms_unscaled`: the root-mean-square distance of the points from A_V(x), nothing fitted;
- `scale` s, fitted (least squares on accuracy, one number for all runs), and `rms`, the distance
  from A_V(s·x): how well the vote model's *shape* holds;
- `spread_scaled` and `spread_raw`: the RMS residual of the points around the best decreasing curve
  through them (isotonic regression, per vocabulary), against x and against the raw length n. A
  collapse is the first much smaller than the second: the scaled variable explains what the raw one
  leaves scattered. Both use the same smoother, so neither is favoured by its form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HERMITE_NODES, HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(64)
COLLAPSE_VARIABLE = "(n − 1)·e^(−2·m_out)/V"
SCALE_BOUNDS = (-12.0, 24.0)  # ln s: from e^−12 to e^24 times the far keys


def vote_accuracy(x: np.ndarray, vocab_size: int) -> np.ndarray:
    """A_V(x) = ∫ φ(z) Φ(z + 1/√x)^{V−1} dz (Gauss–Hermite), for scaled lengths x > 0."""
    from scipy.special import ndtr  # here, not at the top: scipy is half a second of every command's start

    c = 1.0 / np.sqrt(np.asarray(x, dtype=np.float64))
    z = HERMITE_NODES * math.sqrt(2.0)  # ∫ φ(z) f(z) dz = Σ w_i f(√2 t_i) / √π
    values = ndtr(z[None, :] + c[..., None]) ** (vocab_size - 1)
    return values @ HERMITE_WEIGHTS / math.sqrt(math.pi)


def scaled_length(length: np.ndarray, m_out: np.ndarray, vocab_size: np.ndarray) -> np.ndarray:
    return (np.asarray(length, dtype=np.float64) - 1) * np.exp(-2 * np.asarray(m_out)) / np.asarray(vocab_size)


def _decreasing_fit(order_by: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The least-squares non-increasing sequence of `values` sorted by `order_by` (pool adjacent violators)."""
    order = np.argsort(order_by, kind="stable")
    blocks: list[list[float]] = []  # [sum, count]
    for value in values[order]:
        blocks.append([float(value), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    fitted_sorted = np.concatenate([np.full(int(count), total / count) for total, count in blocks])
    fitted = np.empty_like(fitted_sorted)
    fitted[order] = fitted_sorted
    return fitted


def _spread(order_by: np.ndarray, accuracy: np.ndarray, vocab: np.ndarray) -> float:
    residuals = np.empty_like(accuracy)
    for V in np.unique(vocab):
        rows = vocab == V
        residuals[rows] = accuracy[rows] - _decreasing_fit(order_by[rows], accuracy[rows])
    return float(np.sqrt(np.mean(residuals**2)))


@dataclass(frozen=True)
class Collapse:
    x: np.ndarray  # each point's scaled length
    theory: np.ndarray  # A_V(scale·x) at each point
    rms: float  # RMS(accuracy − A_V(scale·x))
    scale: float  # s, fitted to every point at once
    rms_unscaled: float  # RMS(accuracy − A_V(x)): the vote model with m_out as it is
    spread_scaled: float  # RMS residual around the best decreasing curve in x
    spread_raw: float  # the same in the raw length n
    points: int
    variable: str = COLLAPSE_VARIABLE


def collapse(length: np.ndarray, accuracy: np.ndarray, m_out: np.ndarray, vocab_size: np.ndarray) -> Collapse:
    """The collapse of points (length, accuracy) of runs with fitted margins m_out and vocabularies V
    (one entry per point). Points at lengths below 2 (no off-target key) are left out by the caller."""
    n, a = np.asarray(length, dtype=np.float64), np.asarray(accuracy, dtype=np.float64)
    m, V = np.asarray(m_out, dtype=np.float64), np.asarray(vocab_size)
    if not (n.shape == a.shape == m.shape == V.shape) or n.size == 0:
        raise ValueError("collapse needs one length, accuracy, m_out and vocabulary per point, and at least one point")
    x = scaled_length(n, m, V)

    def theory_at(scale: float) -> np.ndarray:
        values = np.empty_like(x)
        for vocab in np.unique(V):
            rows = V == vocab
            values[rows] = vote_accuracy(scale * x[rows], int(vocab))
        return values

    def rms(log_scale: float) -> float:
        return float(np.sqrt(np.mean((a - theory_at(math.exp(log_scale))) ** 2)))

    from scipy.optimize import minimize_scalar  # here: see vote_accuracy

    fitted = minimize_scalar(rms, bounds=SCALE_BOUNDS, method="bounded", options={"xatol": 1e-4})
    scale = math.exp(fitted.x)
    return Collapse(x, theory_at(scale), rms(fitted.x), scale, rms(0.0), _spread(np.log(x), a, V),
                    _spread(np.log(n), a, V), int(n.size))

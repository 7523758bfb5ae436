"""Whether the measured target mass p falls, rises, or both over a run's lengths: the shape test that decides
whether the dilution law is fitted at all (lengen_core.analysis.fit).

The law makes p fall at every length: each far key adds e^{−m_out} to 1/p. So the curve is read as a whole
before anything is fitted. Every pair of measured lengths n_i < n_j is compared: p *falls* between them where
p_i − p_j exceeds TREND_SIGMAS standard errors of the difference, √(se_i² + se_j²), and *rises* where p_j − p_i
does. Then:

- `falling`: p falls somewhere and rises nowhere: the law may describe it;
- `no_dilution`: p falls nowhere (it rises, stays flat, or falls within noise): no dilution, no finite m_out;
- `not_monotone`: p falls somewhere and rises somewhere else: no two-zone law follows that shape, whatever
  (a, m_out) an optimiser stops at.

Why every pair, not the first length against the last: under log-n the default RoPE head's p rose from 0.82 to
0.945 and then fell to 0.786. Compared end to end it had "no dilution" asked up to 2^15 tokens and a law
"within 7%" (m_out 12.56) asked up to 2^16, on the same sequences. Read as a whole it is not monotone at both.

Why one fixed bar, 3.5 standard errors: a pair that is significant stays significant when a longer length is
asked on the same sequences, so the shape found up to 2^a is kept up to 2^(a+1) (a new length can only add a
fall or a rise). 3.5 is the Bonferroni bound for the 190 pairs of 20 lengths at a family-wise 5%: on a flat p
(or one flat within noise for a stretch, as a head at 1× and 2×) sampling noise alone shows a rise or a fall
somewhere with a chance under 5% with up to 20 lengths measured. A real fall is tens of standard errors (0.82
to 0.47 with standard errors 0.004 to 0.006 at 256 samples on the default run).

A standard error of the difference below RESOLUTION (1e-6: none given, or p identical on every sequence, as
for a constructed head at p = 0.9998) counts as RESOLUTION: p is a mean of float32 weights, and differences of
that size between lengths are rounding, not a change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

TrendStatus = Literal["falling", "no_dilution", "not_monotone"]
TREND_SIGMAS = 3.5  # a change counts where it exceeds 3.5 standard errors (Bonferroni, 190 pairs, 5% family-wise)
RESOLUTION = 1e-6  # the least standard error of a difference: float32 rounding of a mean, not a change


@dataclass(frozen=True)
class Change:
    """The most significant fall or rise of p between two measured lengths."""

    start: int  # the shorter length
    end: int
    p_start: float
    p_end: float
    sigmas: float  # |p_end − p_start| over the standard error of the difference

    @property
    def words(self) -> str:
        verb = "falls" if self.p_end < self.p_start else "rises"
        return (f"{verb} from {self.p_start:.3f} at {self.start:,} to {self.p_end:.3f} at {self.end:,} "
                f"({self.sigmas:.3g} standard errors)")


@dataclass(frozen=True)
class Trend:
    status: TrendStatus
    fall: Change | None  # the most significant fall beyond TREND_SIGMAS (None: none is)
    rise: Change | None
    reason: str  # '' where p falls, else one sentence a person reads: why there is no law


def _largest(z: np.ndarray, n: np.ndarray, p: np.ndarray) -> Change | None:
    """The pair (i < j) with the largest z beyond TREND_SIGMAS, or None."""
    if not np.any(z > TREND_SIGMAS):
        return None
    i, j = np.unravel_index(int(np.argmax(z)), z.shape)
    return Change(int(n[i]), int(n[j]), float(p[i]), float(p[j]), float(z[i, j]))


def trend(lengths, masses, sems) -> Trend:
    """The shape of p over the sorted `lengths` (see the module docstring): every pair of lengths compared, in
    standard errors of the difference."""
    n, p = np.asarray(lengths, dtype=np.float64), np.asarray(masses, dtype=np.float64)
    se = np.zeros_like(p) if sems is None else np.asarray(sems, dtype=np.float64)
    drop = p[:, None] - p[None, :]  # drop[i, j] = p_i − p_j
    noise = np.maximum(np.hypot(se[:, None], se[None, :]), RESOLUTION)
    later = np.triu(np.ones(drop.shape, dtype=bool), k=1)  # pairs i < j only
    z = np.where(later, drop / noise, -np.inf)
    fall, rise = _largest(z, n, p), _largest(np.where(later, -z, -np.inf), n, p)
    if fall is not None and rise is None:
        return Trend("falling", fall, None, "")
    if fall is not None:
        first, second = sorted((fall, rise), key=lambda change: (change.start, change.end))
        return Trend("not_monotone", fall, rise, (
            f"No law: the dilution law does not describe this run, because p is not monotone in length: it "
            f"{first.words}, and {second.words}. The law makes p fall at every length (each far key adds to 1/p), "
            f"so no (1/p(L_train), m_out) follows this shape and no m_out is quoted (a change counts beyond "
            f"{TREND_SIGMAS:g} standard errors of the difference)."))
    return Trend("no_dilution", None, rise, _no_fall(n, p, z, noise))


def _no_fall(n: np.ndarray, p: np.ndarray, z: np.ndarray, noise: np.ndarray) -> str:
    """Why p does not fall: its ends, and its largest fall where it has one within noise."""
    start, end = f"{p[0]:.3f} at {int(n[0]):,}", f"{p[-1]:.3f} at {int(n[-1]):,}"
    if p[-1] > p[0]:
        change = f"it rises from {start} to {end}"
    elif p[-1] == p[0] and np.all(p == p[0]):
        change = f"it is {p[0]:.3g} at every length from {int(n[0]):,} to {int(n[-1]):,}"
    else:
        i, j = np.unravel_index(int(np.argmax(z)), z.shape)
        change = (f"from {start} to {end}, its largest fall, from {p[i]:.3f} at {int(n[i]):,} to {p[j]:.3f} at "
                  f"{int(n[j]):,}, is within {TREND_SIGMAS:g} standard errors ({TREND_SIGMAS * noise[i, j]:.3g}) of "
                  "no change")
    return f"No law: p does not fall with length here: {change}, so there is no dilution to fit and no finite m_out."

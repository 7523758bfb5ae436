"""The fitted dilution law (placeholder moved out of dilution.py; rewritten below)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.dilution import _gaussian_expectation


def vote_accuracy(separation: np.ndarray | float, vocab_size: int) -> np.ndarray:
    """A = ∫ φ(z) Φ(z + c)^{V−1} dz: the uniform-floor vote model with separation c."""
    c = torch.as_tensor(np.asarray(separation, dtype=np.float64))
    value = _gaussian_expectation(lambda z: torch.special.ndtr(z + c[..., None]) ** (vocab_size - 1))
    return value.numpy()


@dataclass(frozen=True)
class DilutionFit:
    train_length: int
    vocab_size: int
    intercept: float  # fitted 1/p at the training length
    slope: float  # e^{−m_out}: extra 1/p per extra key
    m_out: float
    r_squared: float
    points: int

    def target_mass(self, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
        n = np.asarray(lengths, dtype=np.float64)
        return 1.0 / np.maximum(self.intercept + self.slope * (n - self.train_length), 1.0)

    def accuracy(self, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
        n = np.maximum(np.asarray(lengths, dtype=np.float64), 2.0)
        separation = np.exp(min(self.m_out, 700.0)) * np.sqrt(self.vocab_size / (n - 1))
        return vote_accuracy(separation, self.vocab_size)


def fit_dilution(
    lengths: Sequence[int], target_masses: Sequence[float], train_length: int, vocab_size: int
) -> DilutionFit | None:
    """Least-squares fit of the two-zone law on the points at or beyond the training length."""
    n = np.asarray(lengths, dtype=np.float64)
    p = np.asarray(target_masses, dtype=np.float64)
    use = (n >= train_length) & (p > 0)
    if use.sum() < 2:
        return None
    x, y = n[use] - train_length, 1.0 / p[use]
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(((y - (intercept + slope * x)) ** 2).sum())
    spread = float(((y - y.mean()) ** 2).sum())
    m_out = -math.log(slope) if slope > 0 else math.inf
    r_squared = 1.0 - residual / spread if spread > 0 else 1.0
    return DilutionFit(train_length, vocab_size, float(intercept), float(slope), m_out, r_squared, int(use.sum()))

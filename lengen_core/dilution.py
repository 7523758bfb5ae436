"""The attention-dilution law (SCIENCE.md §6): prediction from the weights, and the fitted law.

Prediction (never fitted to measurements). At length n the last query t = n-1 with token a sees the
target token c at u* = t − k and n − 1 other keys with iid uniform tokens. From the weights alone we
have every logit T_ab(u) (for RoPE T_ab(u) = s_ab(t − u), the per-token carriers). Then

- target mass: p = g(T_ac(u*)) / (g(T_ac(u*)) + Z_a), Z_a = Σ_{u≠u*} g(T_{a x_u}(u)); we take the
  expectation over tokens to second order in the spread of Z_a;
- accuracy with the ideal (vote) readout: the answer is the token b with the largest attention mass
  U_b = Σ_{u≠u*, x_u=b} f(T_ab(u)), plus f(T_ac(u*)) for c. Each U_b is a sum of many independent
  terms, taken as Gaussian (mean Σ f/V, variance Σ f²(1/V)(1 − 1/V)), so
  P(correct | a, c) = E_z[ Π_{b≠c} Φ((f(T_ac(u*)) + μ_c + σ_c z − μ_b) / σ_b) ].

f = g = exp for softmax (the normaliser cancels in the comparison); for linear attention f is the
identity and g = |·|.

Fitted law (two-zone): 1/p(n) = 1/p(L_train) + (n − L_train)·e^{−m_out}, least squares on the
measured points with n ≥ L_train, reporting m_out and R²; accuracy follows from the uniform-floor
vote model A(n) = ∫ φ(z) Φ(z + c)^{V−1} dz with c = e^{m_out}·√(V/(n−1)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.config import RunConfig

HERMITE_NODES, HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(48)
LOGIT_CLAMP = 300.0  # keeps exp(2·logit) finite in float64


def _gaussian_expectation(function) -> torch.Tensor:
    """E_z[function(z)] for z ~ N(0, 1) by Gauss–Hermite quadrature; function maps (K,) nodes to (..., K)."""
    nodes = torch.tensor(HERMITE_NODES * math.sqrt(2.0), dtype=torch.float64)
    weights = torch.tensor(HERMITE_WEIGHTS / math.sqrt(math.pi), dtype=torch.float64)
    return function(nodes) @ weights


@dataclass
class _KeyStatistics:
    """Sums over the non-target keys of one length, per query token a and key tokens b, b'."""

    vote_sum: torch.Tensor  # (V, V) Σ_u f(T_ab(u))
    vote_square_sum: torch.Tensor  # (V, V) Σ_u f(T_ab(u))²
    vote_cross_sum: torch.Tensor  # (V, V, V) Σ_u f(T_ab(u))·f(T_ab'(u))
    positional_readout: torch.Tensor  # (V, V) Σ_u mean_b f(T_ab(u)) · RP[u]
    mass_mean: torch.Tensor  # (V,) Σ_u mean_b g(T_ab(u))
    mass_variance: torch.Tensor  # (V,) Σ_u var_b g(T_ab(u))
    target_vote: torch.Tensor  # (V, V) f(T_ac(u*)), query a, target c
    target_mass: torch.Tensor  # (V, V) g(T_ac(u*))
    target_positional: torch.Tensor  # (V,) RP[u*] (zero without additive positions)


TRANSFORMS = {  # attention -> (vote transform f, mass transform g)
    "softmax": (torch.exp, torch.exp),
    "linear": (lambda x: x, torch.abs),
}


@torch.no_grad()
def _key_statistics(model: torch.nn.Module, config: RunConfig, length: int, chunk: int = 1 << 13) -> _KeyStatistics:
    vote, mass = TRANSFORMS[config.model.attention]
    V, last = config.task.vocab_size, length - 1
    target_position = last - config.task.offset
    query = model.query_table(last)  # (V, C)
    query_position = torch.tensor([last], device=query.device)
    scale = 1.0 / math.sqrt(query.shape[-1])
    zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64)  # noqa: E731
    stats = _KeyStatistics(*(zeros(V, V), zeros(V, V), zeros(V, V, V), zeros(V, V)), zeros(V), zeros(V),
                           zeros(V, V), zeros(V, V), zeros(V))
    for start in range(0, length, chunk):
        positions = torch.arange(start, min(start + chunk, length), device=query.device)
        table = torch.einsum("ad,bcd->abc", query, model.key_table(positions)) * scale  # (V, V, c)
        bias = model.encoding.bias(query_position, positions)  # (1, 1, c) or None
        if bias is not None:
            table = table + bias[0]
        table = table.double().cpu().clamp(-LOGIT_CLAMP, LOGIT_CLAMP)
        _, positional = model.readout_tables(positions)  # (c, V) or None
        positional = None if positional is None else positional.double().cpu()
        keep = torch.ones(table.shape[-1], dtype=torch.bool)
        if start <= target_position < start + table.shape[-1]:
            local = target_position - start
            stats.target_vote, stats.target_mass = vote(table[..., local]), mass(table[..., local])
            if positional is not None:
                stats.target_positional = positional[local]
            keep[local] = False
        table = table[..., keep]
        f, g = vote(table), mass(table)  # (V, V, c)
        stats.vote_sum += f.sum(-1)
        stats.vote_square_sum += (f * f).sum(-1)
        stats.vote_cross_sum += torch.einsum("abc,aec->abe", f, f)
        if positional is not None:
            stats.positional_readout += f.mean(1) @ positional[keep]
        stats.mass_mean += g.mean(1).sum(-1)
        stats.mass_variance += g.var(1, unbiased=False).sum(-1)
    return stats


def _predicted_mass(stats: _KeyStatistics) -> float:
    target = stats.target_mass  # (V_a, V_c)
    rest = stats.mass_mean[:, None]  # (V_a, 1)
    spread = stats.mass_variance[:, None]
    total = target + rest
    mass = target / total + target * spread / total**3  # second order in the spread of Z_a
    return float(mass.clamp(0.0, 1.0).mean())


GAUSSIAN_DRAWS = 4_096


def _predicted_accuracy(stats: _KeyStatistics, readout: torch.Tensor, positional: bool, seed: int = 0) -> float:
    """P(the readout's argmax is the target), the readout scores taken as Gaussian over random tokens.

    Scores S_y = Σ_u f(T_{a x_u}(u)) (R[x_u, y] + RP[u, y]) + target term; R the token readout (V, V).
    Per query token a the key part has mean Σ_b F1_ab/V · R[b] and covariance
    Σ_b F2_ab/V · R[b]R[b]ᵀ − Σ_bb' X_abb'/V² · R[b]R[b']ᵀ; draw it and count argmax = c.
    """
    V = readout.shape[0]
    stream = torch.Generator().manual_seed(seed)
    correct = 0.0
    for a in range(V):
        mean = stats.vote_sum[a] / V @ readout  # (V_y,)
        second = readout.T @ (stats.vote_square_sum[a, :, None] / V * readout)  # (V_y, V_y)
        cross = readout.T @ (stats.vote_cross_sum[a] / V**2) @ readout
        covariance = second - cross
        jitter = 1e-9 * covariance.diagonal().abs().max().clamp_min(1e-300)
        values, vectors = torch.linalg.eigh(covariance + jitter * torch.eye(V, dtype=torch.float64))
        root = vectors * values.clamp_min(0).sqrt()  # (V, V)
        noise = torch.randn(GAUSSIAN_DRAWS, V, generator=stream, dtype=torch.float64) @ root.T  # (K, V_y)
        target = stats.target_vote[a, :, None] * (readout + stats.target_positional * positional)  # (V_c, V_y)
        centre = mean + stats.positional_readout[a] * positional + target  # (V_c, V_y)
        scores = centre[:, None, :] + noise[None]  # (V_c, K, V_y)
        correct += float((scores.argmax(-1) == torch.arange(V)[:, None]).double().mean())
    return correct / V


@dataclass(frozen=True)
class Prediction:
    length: int
    target_mass: float
    accuracy: float  # with the model's own readout
    vote_accuracy: float  # with the ideal readout (the vote model of SCIENCE.md §6)


def predict(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int]) -> list[Prediction]:
    """Target mass and accuracy at each length, from the trained weights alone."""
    token_part, _ = model.readout_tables(torch.zeros(1, dtype=torch.long, device=model.embed.device))
    readout = token_part.detach().double().cpu()
    additive = bool(getattr(model.encoding, "additive", False))
    ideal = torch.eye(config.task.vocab_size, dtype=torch.float64)
    predictions = []
    for length in lengths:
        stats = _key_statistics(model, config, length)
        predictions.append(
            Prediction(
                length=length,
                target_mass=_predicted_mass(stats),
                accuracy=_predicted_accuracy(stats, readout, additive),
                vote_accuracy=_predicted_accuracy(stats, ideal, False),
            )
        )
    return predictions


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

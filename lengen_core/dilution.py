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

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.carrier import carrier_values, token_coefficients
from lengen_core.config import RunConfig

HERMITE_NODES, HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(48)
LOGIT_HEADROOM = 40.0  # exp(2·40) is finite in float32; a key 40 nats above the target wins anyway


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


def _softmax_transform(logits: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """exp(logit − shift_a): the per-query-token shift cancels in every ratio and keeps float32 finite."""
    return torch.exp((logits - shift.view(-1, *[1] * (logits.dim() - 1))).clamp(max=LOGIT_HEADROOM))


TRANSFORMS = {  # attention -> (vote transform f, mass transform g), each (logits (V, ...), shift (V,))
    "softmax": (_softmax_transform, _softmax_transform),
    "linear": (lambda logits, shift: logits, lambda logits, shift: logits.abs()),
}


def _logit_table(model: torch.nn.Module, query: torch.Tensor, last: int, positions: torch.Tensor) -> torch.Tensor:
    """Logits of the query at `last` (every token, (V, C)) against every token at `positions`: (V, V, c)."""
    table = torch.einsum("ad,bcd->abc", query, model.key_table(positions)) / math.sqrt(query.shape[-1])
    bias = model.encoding.bias(torch.tensor([last], device=query.device), positions)  # (1, 1, c) or None
    return table if bias is None else table + bias[0]


def _table_by_offset(model: torch.nn.Module, last: int):
    """Δ ↦ logits (V, V, c) of the query at `last` against keys at last − Δ, float32 on the CPU.

    RoPE uses its per-token carriers s_ab(Δ) (one GEMM over frequencies, float64 angles) instead of
    rotating V keys per position; other encodings go through the model's tables.
    """
    if getattr(model.encoding, "rotary", False):
        coefficients = token_coefficients(model).cpu()  # (V, V, D/2)
        frequencies = model.encoding.frequencies.cpu()
        return lambda deltas: carrier_values(coefficients, frequencies, deltas).float()
    query = model.query_table(last)
    device = query.device
    return lambda deltas: _logit_table(model, query, last, (last - deltas).to(device)).float().cpu()


@torch.no_grad()
def _key_statistics(
    model: torch.nn.Module, config: RunConfig, length: int, snapshots: Sequence[int], chunk: int = 1 << 13
) -> dict[int, _KeyStatistics]:
    """One sweep over the keys of the last query at `length`, by offset Δ = 0 … length-1.

    For an encoding whose logits depend on Δ alone (RoPE, ALiBi, NoPE) the sums at a shorter length
    n are the partial sums after Δ = n-1, so one sweep serves every length in `snapshots`.
    """
    vote, mass = TRANSFORMS[config.model.attention]
    V, last, k = config.task.vocab_size, length - 1, config.task.offset
    table_of = _table_by_offset(model, last)
    target = table_of(torch.tensor([k]))[..., 0]  # (V_a, V_c)
    target_positions = torch.tensor([last - k], device=model.embed.device)
    shift = target.max(dim=1).values if config.model.attention == "softmax" else torch.zeros(V)
    _, positional = model.readout_tables(target_positions)
    zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64)
    stats = _KeyStatistics(
        vote_sum=zeros(V, V), vote_square_sum=zeros(V, V), vote_cross_sum=zeros(V, V, V),
        positional_readout=zeros(V, V), mass_mean=zeros(V), mass_variance=zeros(V),
        target_vote=vote(target, shift).double(), target_mass=mass(target, shift).double(),
        target_positional=zeros(V) if positional is None else positional[0].double().cpu(),
    )
    bounds = sorted({*range(0, length, chunk), *snapshots, length})
    taken: dict[int, _KeyStatistics] = {}
    for begin, end in itertools.pairwise(bounds):
        deltas = torch.tensor([d for d in range(begin, end) if d != k], dtype=torch.long)
        if len(deltas):
            table = table_of(deltas)  # (V, V, c)
            f, g = vote(table, shift), mass(table, shift)
            stats.vote_sum += f.sum(-1).double()
            stats.vote_square_sum += (f * f).sum(-1).double()
            stats.vote_cross_sum += torch.einsum("abc,aec->abe", f, f).double()
            _, readout = model.readout_tables((last - deltas).to(model.embed.device))  # (c, V) or None
            if readout is not None:
                stats.positional_readout += (f.mean(1) @ readout.float().cpu()).double()
            g_mean = g.mean(1).double()  # (V_a, c): mean over key tokens
            stats.mass_mean += g_mean.sum(-1)
            stats.mass_variance += (g * g).sum(-1).double().mean(1) - (g_mean * g_mean).sum(-1)
        if end in snapshots:
            taken[end] = _KeyStatistics(**{name: value.clone() for name, value in vars(stats).items()})
    return taken


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
    mean = stats.vote_sum / V @ readout  # (V_a, V_y)
    second = torch.einsum("ab,by,bz->ayz", stats.vote_square_sum / V, readout, readout)
    cross = torch.einsum("abe,by,ez->ayz", stats.vote_cross_sum / V**2, readout, readout)
    covariance = second - cross  # (V_a, V_y, V_y)
    jitter = 1e-9 * covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1).clamp_min(1e-300)
    values, vectors = torch.linalg.eigh(covariance + jitter[:, None, None] * torch.eye(V, dtype=torch.float64))
    root = vectors * values.clamp_min(0).sqrt()[:, None, :]  # (V_a, V_y, V_y)
    stream = torch.Generator().manual_seed(seed)
    draws = torch.randn(GAUSSIAN_DRAWS, V, generator=stream, dtype=torch.float64)
    noise = torch.einsum("kz,ayz->aky", draws, root)  # (V_a, K, V_y)
    target = stats.target_vote[:, :, None] * (readout + stats.target_positional * positional)  # (V_a, V_c, V_y)
    centre = mean[:, None, :] + stats.positional_readout[:, None, :] * positional + target
    scores = centre[:, :, None, :] + noise[:, None, :, :]  # (V_a, V_c, K, V_y)
    return float((scores.argmax(-1) == torch.arange(V)[None, :, None]).double().mean())


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
    if getattr(model.encoding, "relative", False):
        swept = _key_statistics(model, config, max(lengths), lengths)
    else:
        swept = {n: _key_statistics(model, config, n, [n])[n] for n in lengths}
    predictions = []
    for length in lengths:
        stats = swept[length]
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

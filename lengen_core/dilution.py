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

Cost (issue 6: 20 lengths up to 2^20 in about a second on two cores). Every length's sums come from
one sweep over Δ in float32 blocks of KEY_CHUNK keys (RoPE: one GEMM per block, the rotation taken
in float64); the square and mass sums are read off the cross sums; the readout's argmax is counted
against each target's best rival, never through a (V, V, K, V) score tensor (lengen_core.argmax_count).
Same inputs, same draws, same answer; tests/unit/test_prediction_speed_equivalence.py holds each
piece to its plain form.

The fitted law lives in lengen_core.fit: it is fitted to measurements, this module never is.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.argmax_count import argmax_hits, standard_draws
from lengen_core.carrier import CarrierBlocks, carrier_values, token_coefficients
from lengen_core.config import RunConfig
from lengen_core.evaluate import check_lengths, check_sweep

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


def _softmax_transform(logits: torch.Tensor, below_headroom: bool = False) -> torch.Tensor:
    """exp(logit − shift_a), in place on logits already shifted: the per-query-token shift cancels in
    every ratio and keeps float32 finite (the clamp is skipped where a bound shows it does nothing)."""
    return (logits if below_headroom else logits.clamp_(max=LOGIT_HEADROOM)).exp_()


TRANSFORMS = {  # attention -> (vote transform f, mass transform g) of logits − shift_a; f may work in place
    "softmax": (_softmax_transform, None),  # g = f: the mass sums are the vote sums
    "linear": (lambda logits, below_headroom=False: logits, torch.abs),
}

KEY_CHUNK = 4_096  # keys per block: a (V, V, chunk) float32 block (4 MiB at V = 16) stays in cache between passes


def _logit_table(model: torch.nn.Module, query: torch.Tensor, last: int, positions: torch.Tensor) -> torch.Tensor:
    """Logits of the query at `last` (every token, (V, C)) against every token at `positions`: (V, V, c)."""
    table = torch.einsum("ad,bcd->abc", query, model.key_table(positions)) / math.sqrt(query.shape[-1])
    bias = model.encoding.bias(torch.tensor([last], device=query.device), positions)  # (1, 1, c) or None
    return table if bias is None else table + bias[0]


def _target_logits(model: torch.nn.Module, last: int, offset: int) -> torch.Tensor:
    """Logits (V_a, V_c) of the query at `last` against the key at last − offset, float32 on the CPU."""
    if getattr(model.encoding, "rotary", False):
        coefficients, frequencies = token_coefficients(model).cpu(), model.encoding.frequencies.cpu()
        return carrier_values(coefficients, frequencies, torch.tensor([offset]))[..., 0].float()
    query = model.query_table(last)
    return _logit_table(model, query, last, torch.tensor([last - offset], device=query.device))[..., 0].float().cpu()


def _shifted_blocks(model: torch.nn.Module, last: int, shift: torch.Tensor):
    """(begin, end) ↦ logits − shift_a (V, V, end − begin) of the query at `last` against the keys at
    last − Δ, Δ = begin … end−1: float32 on the CPU, blocks at most KEY_CHUNK long.

    RoPE uses its per-token carriers s_ab(Δ) (carrier.CarrierBlocks: float64 angles, one float32 GEMM
    per block) instead of rotating V keys per position; other encodings go through the model's tables.
    """
    if getattr(model.encoding, "rotary", False):
        coefficients, frequencies = token_coefficients(model).cpu(), model.encoding.frequencies.cpu()
        return CarrierBlocks(coefficients, frequencies, KEY_CHUNK, shift)
    query = model.query_table(last)
    device = query.device

    def block(begin: int, end: int) -> torch.Tensor:
        positions = (last - torch.arange(begin, end)).to(device)
        return _logit_table(model, query, last, positions).float().cpu() - shift.view(-1, 1, 1)

    return block


@dataclass
class _RunningSums:
    """Float64 sums over the keys swept so far; the rest of _KeyStatistics follows from them."""

    vote: torch.Tensor  # (V, V) Σ f
    cross: torch.Tensor  # (V, V, V) Σ f_ab·f_ab'; its diagonal is Σ f²
    positional: torch.Tensor  # (V, V) Σ mean_b f · RP[u]
    mass: torch.Tensor  # (V,) Σ mean_b g (only when g ≠ f)
    mass_square: torch.Tensor  # (V,) Σ (mean_b g)² (only when g ≠ f)

    def add(self, f: torch.Tensor, g: torch.Tensor | None, readout: torch.Tensor | None) -> None:
        self.vote += f.sum(-1).double()
        self.cross += torch.bmm(f, f.transpose(1, 2)).double()  # (V_a, V_b, V_b')
        if readout is not None:
            self.positional += (f.mean(1) @ readout).double()
        if g is not None:
            g_mean = g.mean(1).double()  # (V_a, c): mean over key tokens
            self.mass += g_mean.sum(-1)
            self.mass_square += (g_mean * g_mean).sum(-1)

    def statistics(self, same_mass: bool, **targets: torch.Tensor) -> _KeyStatistics:
        V = self.vote.shape[0]
        square = self.cross.diagonal(dim1=1, dim2=2).clone()  # (V, V)
        if same_mass:  # g = f: Σ_u (mean_b g)² = Σ_bb' X_abb' / V²
            mass, mass_square = self.vote.mean(1), self.cross.sum(dim=(1, 2)) / V**2
        else:
            mass, mass_square = self.mass.clone(), self.mass_square.clone()
        return _KeyStatistics(
            vote_sum=self.vote.clone(), vote_square_sum=square, vote_cross_sum=self.cross.clone(),
            positional_readout=self.positional.clone(), mass_mean=mass, mass_variance=square.mean(1) - mass_square,
            **targets,
        )


@torch.no_grad()
def _key_statistics(
    model: torch.nn.Module, config: RunConfig, length: int, snapshots: Sequence[int]
) -> dict[int, _KeyStatistics]:
    """One sweep over the keys of the last query at `length`, by offset Δ = 0 … length-1.

    For an encoding whose logits depend on Δ alone (RoPE, ALiBi, NoPE) the sums at a shorter length
    n are the partial sums after Δ = n-1, so one sweep serves every length in `snapshots`.
    """
    vote, mass = TRANSFORMS[config.model.attention]
    V, last, k = config.task.vocab_size, length - 1, config.task.offset
    target = _target_logits(model, last, k)  # (V_a, V_c)
    shift = target.max(dim=1).values if config.model.attention == "softmax" else torch.zeros(V)
    shifted_target = target - shift[:, None]
    _, positional = model.readout_tables(torch.tensor([last - k], device=model.embed.device))
    targets = {
        "target_vote": vote(shifted_target.clone()).double(),
        "target_mass": (vote if mass is None else mass)(shifted_target.clone()).double(),
        "target_positional": torch.zeros(V, dtype=torch.float64) if positional is None else positional[0].double().cpu(),
    }
    zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64)
    sums = _RunningSums(zeros(V, V), zeros(V, V, V), zeros(V, V), zeros(V), zeros(V))
    blocks = _shifted_blocks(model, last, shift)
    below_headroom = getattr(blocks, "upper_bound", math.inf) <= LOGIT_HEADROOM - 1.0  # 1 nat for float32 rounding
    bounds = sorted({*range(0, length, KEY_CHUNK), *snapshots, length})
    taken: dict[int, _KeyStatistics] = {}
    for begin, end in itertools.pairwise(bounds):
        f = vote(blocks(begin, end), below_headroom)  # (V, V, c)
        if begin <= k < end:
            f[..., k - begin] = 0.0  # the target key is not one of the others (f(0) = g(0) = 0)
        readout = None
        if positional is not None:
            _, readout = model.readout_tables((last - torch.arange(begin, end)).to(model.embed.device))
            readout = readout.float().cpu()  # (c, V)
        sums.add(f, None if mass is None else mass(f), readout)
        if end in snapshots:
            taken[end] = sums.statistics(mass is None, **targets)
    return taken


def _predicted_mass(stats: _KeyStatistics) -> float:
    target = stats.target_mass  # (V_a, V_c)
    rest = stats.mass_mean[:, None]  # (V_a, 1)
    spread = stats.mass_variance[:, None]
    total = target + rest
    mass = target / total + target * spread / total**3  # second order in the spread of Z_a
    return float(mass.clamp(0.0, 1.0).mean())


def _predicted_accuracy(stats: _KeyStatistics, readout: torch.Tensor, positional: bool, draws: torch.Tensor) -> float:
    """P(the readout's argmax is the target), the readout scores taken as Gaussian over random tokens.

    Scores S_y = Σ_u f(T_{a x_u}(u)) (R[x_u, y] + RP[u, y]) + target term; R the token readout (V, V).
    Per query token a the key part has mean Σ_b F1_ab/V · R[b] and covariance
    Σ_b F2_ab/V · R[b]R[b]ᵀ − Σ_bb' X_abb'/V² · R[b]R[b']ᵀ; draw it (draws (K, V)) and count argmax = c.
    """
    V = readout.shape[0]
    mean = stats.vote_sum / V @ readout  # (V_a, V_y)
    second = torch.einsum("ab,by,bz->ayz", stats.vote_square_sum / V, readout, readout)
    cross = torch.einsum("abe,by,ez->ayz", stats.vote_cross_sum / V**2, readout, readout)
    covariance = second - cross  # (V_a, V_y, V_y)
    jitter = 1e-9 * covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1).clamp_min(1e-300)
    values, vectors = torch.linalg.eigh(covariance + jitter[:, None, None] * torch.eye(V, dtype=torch.float64))
    root = vectors * values.clamp_min(0).sqrt()[:, None, :]  # (V_a, V_y, V_y)
    noise = (root.reshape(V * V, V) @ draws.T).view(V, V, -1)  # (V_a, V_y, K)
    target = stats.target_vote[:, :, None] * (readout + stats.target_positional * positional)  # (V_a, V_c, V_y)
    centre = mean[:, None, :] + stats.positional_readout[:, None, :] * positional + target
    return argmax_hits(centre, noise) / (V * V * draws.shape[0])


@dataclass(frozen=True)
class Prediction:
    length: int
    target_mass: float
    accuracy: float  # with the model's own readout
    vote_accuracy: float  # with the ideal readout (the vote model of SCIENCE.md §6)


def predict(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int]) -> list[Prediction]:
    """Target mass and accuracy at each length, from the trained weights alone."""
    check_lengths(config, model, lengths)
    check_sweep(lengths)
    token_part, _ = model.readout_tables(torch.zeros(1, dtype=torch.long, device=model.embed.device))
    readout = token_part.detach().double().cpu()
    additive = bool(getattr(model.encoding, "additive", False))
    ideal = torch.eye(config.task.vocab_size, dtype=torch.float64)
    if getattr(model.encoding, "relative", False):
        swept = _key_statistics(model, config, max(lengths), lengths)
    else:
        swept = {n: _key_statistics(model, config, n, [n])[n] for n in lengths}
    draws = standard_draws(config.task.vocab_size)
    predictions = []
    for length in lengths:
        stats = swept[length]
        predictions.append(
            Prediction(
                length=length,
                target_mass=_predicted_mass(stats),
                accuracy=_predicted_accuracy(stats, readout, additive, draws),
                vote_accuracy=_predicted_accuracy(stats, ideal, False, draws),
            )
        )
    return predictions

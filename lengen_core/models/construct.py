"""A learned-position head built by hand to implement the relative rule (C1: expressivity).

The paper's account of C1 is that learned absolute positions *can* express "attend k places back"
at every length; training just never finds that solution. This module writes the solution down, in
the weights of the ordinary `MinimalHead` with a learned table, so it can be stored, evaluated and
trained further like any run (`init constructed`).

Layout of the d_model = C features (V token features, then m pairs, then at most one spare):

    E[a]     = e_a                                   token one-hot in features 0 … V-1
    P_t      = (cos ω_j t)_j ⊕ (sin ω_j t)_j         features V … V+2m-1, ω_j = base^(-j/m), j < m
    W_K      = identity on the position features     keys purely positional: k_u = P_u
    W_Q      = s·R(−ω_j k) on each pair, s = A·√C    q_t = s·(cos ω_j (t−k), sin ω_j (t−k))_j
    W_V, W_U = identity on the token features        values e_{x_u}: a vote readout

so the logit of query t on key u is q_t·k_u/√C = A·c(t − u − k), with the carrier
c(δ) = Σ_j cos(ω_j δ), largest (= m) at δ = 0, i.e. on the key u = t − k, at every length.
The frequencies are RoPE's for a head of width 2m (`rope_frequencies(2m, base)`), m the number of
pairs that fit after the V token features. Nothing is random: the seed only sets the training data
of a run that trains on from here.

Amplitude rule. Let g = m − max c(δ) over 1 ≤ |δ| ≤ N − 1, N = max_positions: the margin of the
target over the closest other key anywhere in the table. With A = ln(2(N − 1))/g every other key
has weight ≤ e^{−A·g} = 1/(2(N − 1)) of the target's, so at any length n ≤ N the n − 1 other keys
together hold at most half the target's weight: the target's attention mass is ≥ 2/3, more than
all other keys together, and the vote readout answers right on every sequence (accuracy 1 up to the
end of the table, whatever the tokens). A config whose pairs leave g < `MIN_GAP` (too few pairs to
tell the offsets of the table apart) is refused, naming the d_model that would do.

The readout is the plain vote: each answer's logit is the attention mass on the keys holding it
(≤ 1), so the construction answers right but its loss is not small (ln(1 + (V − 1)/e) ≈ 1.87 at
V = 16 when the target holds all the mass). It is a solution of the task, not a minimum of the
loss: training from it has a gradient to follow, which is what the experiment of
lengen_core.optimisation watches (does lowering the loss keep the rule?). Scaled up so the loss is
≈ 0, the gradient vanishes and training from it moves nothing (docs/science.md §11).
"""

from __future__ import annotations

import functools
import math

import torch

from lengen_core.config import MAX_D_MODEL, ConfigError, RunConfig
from lengen_core.models.encodings import rope_frequencies

MIN_GAP = 0.1  # the least carrier margin accepted: A stays ≤ ln(2^17)/0.1 ≈ 118, logits far inside float32
GAP_CHUNK = 4_096  # offsets per chunk of the margin search: (chunk, m) float64


def frequencies(pairs: int, base: float) -> torch.Tensor:
    """ω_j = base^(−j/m), j < m: RoPE's frequencies for a head of width 2m, float64."""
    return rope_frequencies(2 * pairs, base)


@functools.lru_cache(maxsize=256)
def carrier_gap(pairs: int, base: float, max_positions: int) -> float:
    """g = m − max c(δ) over 1 ≤ δ ≤ max_positions − 1 (c is even, so this covers negative δ too)."""
    omega = frequencies(pairs, base)
    best = -math.inf
    for start in range(1, max_positions, GAP_CHUNK):
        delta = torch.arange(start, min(start + GAP_CHUNK, max_positions), dtype=torch.float64)
        best = max(best, float(torch.cos(delta[:, None] * omega[None]).sum(dim=1).max()))  # (chunk, m) → scalar
    return pairs - best if best > -math.inf else float(pairs)


def check_constructible(vocab_size: int, d_model: int, max_positions: int, rope_base: float) -> None:
    """`ConfigError` unless d_model leaves enough position pairs after the V token features for a
    carrier margin ≥ `MIN_GAP` over the whole table; the message names a d_model that would do."""
    pairs = (d_model - vocab_size) // 2
    if pairs >= 1 and carrier_gap(pairs, rope_base, max_positions) >= MIN_GAP:
        return
    needed = next((vocab_size + 2 * m + (vocab_size % 2) for m in range(max(pairs + 1, 1), MAX_D_MODEL)
                   if vocab_size + 2 * m <= MAX_D_MODEL and carrier_gap(m, rope_base, max_positions) >= MIN_GAP),
                  None)
    what = (f"d_model {d_model} leaves {max(pairs, 0)} position pair(s) after the {vocab_size} token features, "
            f"too few for the constructed head to tell the {max_positions} positions apart (carrier margin "
            f"below {MIN_GAP})")
    if needed is None:
        raise ConfigError(f"{what}; no d_model up to {MAX_D_MODEL} does at rope base {rope_base:g}: "
                          "use fewer max positions or a smaller vocab")
    raise ConfigError(f"{what}; the smallest d_model above it that works is {needed} (or use fewer max positions)")


def amplitude(pairs: int, base: float, max_positions: int) -> float:
    """A = ln(2(N − 1))/g: the target's mass stays ≥ 2/3 at every length up to N (module docstring)."""
    return math.log(2 * max(max_positions - 1, 1)) / carrier_gap(pairs, base, max_positions)


@torch.no_grad()
def construct(model: torch.nn.Module, config: RunConfig) -> torch.nn.Module:
    """Overwrite every weight of a learned-position `MinimalHead` with the constructed head; returns it."""
    if config.train.init != "constructed":
        raise ValueError("construct builds the head of a config with init constructed")
    V, C = config.task.vocab_size, config.model.d_model
    N, base, k = config.model.max_positions, config.model.rope_base, config.task.offset
    check_constructible(V, C, N, base)
    m = (C - V) // 2
    cos_dims, sin_dims = torch.arange(V, V + m), torch.arange(V + m, V + 2 * m)
    omega = frequencies(m, base)
    angles = torch.arange(N, dtype=torch.float64)[:, None] * omega[None]  # (N, m)
    table = torch.zeros(N, C, dtype=torch.float64)
    table[:, cos_dims], table[:, sin_dims] = torch.cos(angles), torch.sin(angles)

    # Row vectors: q = x @ W_Q. (cos ωt, sin ωt) ↦ (cos ω(t−k), sin ω(t−k)), scaled by s.
    s = amplitude(m, base, N) * math.sqrt(C)
    cos_k, sin_k = torch.cos(omega * k), torch.sin(omega * k)  # (m,)
    W_Q = torch.zeros(C, C, dtype=torch.float64)
    W_Q[cos_dims, cos_dims], W_Q[sin_dims, cos_dims] = s * cos_k, s * sin_k
    W_Q[cos_dims, sin_dims], W_Q[sin_dims, sin_dims] = -s * sin_k, s * cos_k
    W_K = torch.zeros(C, C, dtype=torch.float64)
    W_K[cos_dims, cos_dims], W_K[sin_dims, sin_dims] = 1.0, 1.0
    tokens = torch.arange(V)
    embed, W_V, W_U = torch.zeros(V, C), torch.zeros(C, C), torch.zeros(C, V)
    embed[tokens, tokens], W_V[tokens, tokens], W_U[tokens, tokens] = 1.0, 1.0, 1.0

    for parameter, value in ((model.embed, embed), (model.W_Q, W_Q), (model.W_K, W_K), (model.W_V, W_V),
                             (model.W_U, W_U), (model.encoding.table, table)):
        parameter.copy_(value.to(parameter.dtype))
    return model

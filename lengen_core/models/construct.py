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

import math

import torch

from lengen_core.config import RunConfig, check_constructible
from lengen_core.frequencies import carrier_gap, rope_frequencies


def frequencies(pairs: int, base: float) -> torch.Tensor:
    """ω_j = base^(−j/m), j < m: RoPE's frequencies for a head of width 2m, float64."""
    return rope_frequencies(2 * pairs, base)


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

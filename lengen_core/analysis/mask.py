"""The mask's share of absolute position (docs/science.md §12, issue 30 §2): the softmax denominator
Z_t = Σ_{u ≤ t} e^{logit(t, u)} of each query, against its position t.

A causal softmax query at t normalises over the t + 1 keys the mask lets it see, so Z_t grows with t
even when every logit depends on t − u alone. Where the logits are per-token carriers s_ab(Δ) (the
minimal RoPE head; layer 0 of a RoPE transformer, whose inputs are LN of the token embeddings) the
expected denominator is an exact sum from the weights (`exact_log_denominator`); for every head of every
layer it is measured from the logits of forward passes (`QuerySums`, `measured_log_denominator`). Pure:
nothing printed, the model never changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lengen_core.analysis.carrier import carrier_values, token_coefficients
from lengen_core.analysis.evaluate import check_lengths, sequence_tokens
from lengen_core.analysis.sequence import tokens_per_batch
from lengen_core.config import ConfigError, RunConfig

DENOMINATOR_SAMPLES = 256  # sequences the measured denominators are averaged over by default
DENOMINATOR_SEED = 17  # their seed (lengen_core.analysis.evaluate.sequence_tokens)


class QuerySums:
    """An observer summing, per layer, head and query position (layers, H, T): the weight on key 0,
    and the softmax denominator Z_t = Σ_{u ≤ t} e^{logit(t, u)} (float64, from each query's logsumexp)."""

    def __init__(self, layers: int, heads: int, length: int) -> None:
        self.sums = torch.zeros(layers, heads, length, dtype=torch.float64)
        self.denominators = torch.zeros(layers, heads, length, dtype=torch.float64)

    def __call__(self, layer: int, start: int, logits: torch.Tensor, weights: torch.Tensor) -> None:
        stop = start + weights.shape[2]
        self.sums[layer, :, start:stop] += weights[..., 0].sum(0).cpu().double()
        queries = torch.arange(start, stop, device=logits.device)
        hidden = torch.arange(logits.shape[-1], device=logits.device)[None, :] > queries[:, None]  # (q, T)
        log_z = logits.double().masked_fill(hidden, -math.inf).logsumexp(-1)  # (B, H, q)
        self.denominators[layer, :, start:stop] += log_z.exp().sum(0).cpu()



@torch.no_grad()
def _head_coefficients(model: nn.Module) -> torch.Tensor:
    """c_abj = q_j(a)·conj(k_j(b))/√D per head, from the token inputs alone: (H, V, V, D/2) complex128.
    The minimal head's queries and keys are its tables; layer 0 of a transformer reads LN(E) (no
    position table under RoPE), so its logits are per-token carriers too."""
    if getattr(model, "blocks", None) is None:
        return token_coefficients(model)[None]
    block = model.blocks[0]
    C, H = model.embed.shape[1], block.n_heads
    q, k, _ = (block.norm_attention(model.embed) @ block.W_QKV).split(C, dim=-1)  # (V, C) each
    q, k = (t.reshape(-1, H, C // H).transpose(0, 1).cpu().double() for t in (q, k))  # (H, V, D)
    half = q.shape[-1] // 2
    qz, kz = torch.complex(q[..., :half], q[..., half:]), torch.complex(k[..., :half], k[..., half:])
    return qz[:, :, None, :] * kz.conj()[:, None, :, :] / math.sqrt(q.shape[-1])  # (H, V, V, D/2)


def exact_log_denominator(model: nn.Module, length: int) -> np.ndarray:
    """ln E[Z_t] for t = 0 … length − 1, per head of the minimal RoPE head or of layer 0 of a RoPE
    transformer: (H, length). With per-token carriers s_ab(Δ), a query of token a at t sees itself
    (Δ = 0) and t keys of iid uniform tokens, so

        E[Z_t] = (1/V) Σ_a [ e^{s_aa(0)} + Σ_{Δ=1}^{t} (1/V) Σ_b e^{s_ab(Δ)} ],

    which depends on t only through how many keys the causal mask shows the query: the mask's share
    of the position signal is all of it here. Exact (float64), no sampling."""
    if not model.encoding.rotary:
        raise ConfigError("the exact denominator needs per-token carriers, which RoPE has: this run's logits "
                          "are not a function of the tokens and t − u alone")
    coefficients = _head_coefficients(model)
    s = carrier_values(coefficients, model.encoding.frequencies.cpu(), torch.arange(length))  # (H, V, V, T)
    top = s.amax(dim=(1, 2, 3), keepdim=True)  # (H, 1, 1, 1): every exponent ≤ 0
    e = torch.exp(s - top)
    own = torch.diagonal(e[..., 0], dim1=1, dim2=2)  # (H, V): e^{s_aa(0)}
    others = e[..., 1:].mean(dim=2)  # (H, V, T-1): mean over key tokens b
    expected = torch.cat((own[..., None], own[..., None] + others.cumsum(-1)), dim=-1).mean(1)  # (H, T)
    return (expected.log() + top[:, 0, 0]).numpy()


@dataclass(frozen=True)
class MaskShare:
    """ln E[Z_t] for queries t = 0 … length − 1: exact from the weights per head (H, T) where the logits are
    per-token carriers (None elsewhere), and measured per layer and head (layers, H, T)."""

    length: int
    samples: int
    exact: np.ndarray | None
    measured: np.ndarray


def has_denominator(config: RunConfig) -> bool:
    """Whether the run's attention normalises (softmax): linear attention has no denominator to read."""
    return config.model.attention == "softmax"


def mask_share(model: nn.Module, config: RunConfig, length: int, samples: int = DENOMINATOR_SAMPLES) -> MaskShare:
    """The softmax denominators of any softmax run, the minimal head included (module docstring)."""
    if not has_denominator(config):
        raise ConfigError("the mask's share reads the softmax denominator; linear attention has none: choose a "
                          "softmax run")
    check_lengths(config, model, [length])
    exact = exact_log_denominator(model, length) if model.encoding.rotary else None
    return MaskShare(length, samples, exact, measured_log_denominator(model, config, length, samples))


@torch.no_grad()
def measured_log_denominator(model: nn.Module, config: RunConfig, length: int, samples: int,
                             seed: int = DENOMINATOR_SEED) -> np.ndarray:
    """ln of the mean softmax denominator Z_t over `samples` random sequences, per layer and head, from
    the logits of forward passes: (layers, H, length) (the minimal head: one layer of one head)."""
    device = next(model.parameters()).device
    layers, heads = max(1, config.model.n_layers), 1 if config.model.minimal else config.model.n_heads
    sums = QuerySums(layers, heads, length)
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(device)
    batch = max(1, tokens_per_batch(config) // length)
    for begin in range(0, samples, batch):
        model(tokens[begin : begin + batch], 0, observe=sums)
    return np.log((sums.denominators / samples).numpy())

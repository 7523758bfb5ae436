"""Attention logits and the two ways of mixing values: softmax and linear (the C7 control).

Shapes: q (B, H, Tq, D), k and v (B, H, Tk, D), logits and weights (B, H, Tq, Tk).
Positions are absolute; a key is visible to a query when key position ≤ query position.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from lengen_core.models.encodings import PositionalEncoding


def attention_logits(
    q: torch.Tensor,
    k: torch.Tensor,
    query_positions: torch.Tensor,
    key_positions: torch.Tensor,
    encoding: PositionalEncoding,
    heads: slice = slice(None),
) -> torch.Tensor:
    """q·k/√D plus the encoding's bias, times the encoding's logit scale where an inference rule sets
    one (lengen_core.analysis.rules); q and k already carry the encoding's rotation. `heads`: the model's
    heads that q and k hold (all of them unless one head is drawn), so a per-head bias is taken for them."""
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    bias = encoding.bias(query_positions, key_positions)  # (H, Tq, Tk) or None
    logits = logits if bias is None else logits + bias[heads]
    scale = encoding.logit_scale(query_positions)  # (Tq,) or None
    return logits if scale is None else logits * scale[:, None].to(logits.dtype)


def causal_mask(query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    return key_positions[None, :] <= query_positions[:, None]  # (Tq, Tk)


def softmax_weights(logits: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
    """`visible` (Tq, Tk), or None when every key is visible to every query."""
    return torch.softmax(logits if visible is None else logits.masked_fill(~visible, float("-inf")), dim=-1)


def linear_weights(logits: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
    """o_t = Σ_{u≤t} (q_t·k_u/√D) v_u: the logits themselves, unnormalised."""
    return logits if visible is None else logits.masked_fill(~visible, 0.0)


ATTENTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]] = {
    "softmax": softmax_weights,
    "linear": linear_weights,
}


# Called with (layer, first query position, logits, weights) for each block of queries. An observer that reads
# one head of one layer and stops the forward pass there (by raising, once that layer's last query is seen)
# says so with an attribute `only = (layer, head)`: that layer then computes that head alone (`drawn_head`).
Observer = Callable[[int, int, torch.Tensor, torch.Tensor], None]
QUERY_BLOCK_ELEMENTS = 1 << 22  # logits held at once


def blocked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    query_start: int,
    encoding: PositionalEncoding,
    weights_from_logits: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    observe: Observer | None = None,
    layer: int = 0,
) -> torch.Tensor:
    """Attention for queries query_start … T-1, a block of queries at a time, so memory is
    O(block · T): q (B, H, Tq, D) already rotated, k and v (B, H, T, D) -> (B, H, Tq, D).
    A block holds at most QUERY_BLOCK_ELEMENTS logits (fewer queries as heads and length grow); with
    several blocks each one's output is written into the result as it is made (no list to join), and
    its logits and weights are let go before the next block's. At the layer where the observer reads one
    head and stops (`drawn_head`), only that head is computed: the observer gets (B, 1, q, T)."""
    head = drawn_head(observe, layer)
    heads = slice(None) if head is None else slice(head, head + 1)
    q, k, v = q[:, heads], k[:, heads], v[:, heads]
    B, H, T, _ = k.shape
    positions = torch.arange(T, device=k.device)
    block = max(1, QUERY_BLOCK_ELEMENTS // (B * H * T))
    out = None if block >= T - query_start else q.new_empty(B, H, T - query_start, v.shape[-1])  # (B, H, Tq, D)
    for start in range(query_start, T, block):
        stop = min(start + block, T)
        query_positions = positions[start:stop]
        logits = attention_logits(q[:, :, start - query_start : stop - query_start], k, query_positions, positions, encoding,
                                  heads)
        visible = None if start == T - 1 else causal_mask(query_positions, positions)  # the last query sees all
        weights = weights_from_logits(logits, visible)  # (B, H, q, T)
        if observe is not None:
            observe(layer, start, logits, weights)
        if head is None:  # where the observer stops the pass at this layer, no output is needed
            if out is None:
                return weights @ v  # one block: (B, H, Tq, D)
            out[:, :, start - query_start : stop - query_start] = weights @ v  # (B, H, q, D)
        del logits, weights
    if head is not None:
        raise RuntimeError(f"an observer reading only head {head} of layer {layer} must stop the forward pass there")
    return out


def drawn_head(observe: Observer | None, layer: int) -> int | None:
    """The one head `observe` reads at `layer`, where it stops the forward pass (its `only`); None elsewhere."""
    only = getattr(observe, "only", None)
    return only[1] if only is not None and only[0] == layer else None


def collect_patterns(record: list) -> Observer:
    """An observer that keeps every block, for `attend` on short sequences."""
    return lambda layer, start, logits, weights: record.append((layer, logits, weights))


@dataclass(frozen=True)
class AttentionPattern:
    """One layer's attention for a batch: logits and weights (B, H, Tq, T)."""

    layer: int
    logits: torch.Tensor
    weights: torch.Tensor


def patterns_of(model: nn.Module, tokens: torch.Tensor, query_start: int) -> list[AttentionPattern]:
    """Every layer's logits and weights (B, H, Tq, T) for queries query_start … T-1 (O(T²): short inputs)."""
    record: list = []
    model(tokens, query_start, observe=collect_patterns(record))
    layers = sorted({layer for layer, _, _ in record})
    patterns = []
    for layer in layers:
        blocks = [(logits, weights) for index, logits, weights in record if index == layer]
        logits = torch.cat([b[0] for b in blocks], dim=2)
        weights = torch.cat([b[1] for b in blocks], dim=2)
        T = tokens.shape[1]
        patterns.append(AttentionPattern(layer, logits[:, :, -(T - query_start) :], weights[:, :, -(T - query_start) :]))
    return patterns

"""Attention logits and the two ways of mixing values: softmax and linear (the C7 control).

Shapes: q (B, H, Tq, D), k and v (B, H, Tk, D), logits and weights (B, H, Tq, Tk).
Positions are absolute; a key is visible to a query when key position ≤ query position.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lengen_core.encodings import PositionalEncoding


def attention_logits(
    q: torch.Tensor,
    k: torch.Tensor,
    query_positions: torch.Tensor,
    key_positions: torch.Tensor,
    encoding: PositionalEncoding,
) -> torch.Tensor:
    """q·k/√D plus the encoding's bias; q and k already carry the encoding's rotation."""
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    bias = encoding.bias(query_positions, key_positions)  # (H, Tq, Tk) or None
    return logits if bias is None else logits + bias


def causal_mask(query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    return key_positions[None, :] <= query_positions[:, None]  # (Tq, Tk)


def softmax_weights(logits: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.masked_fill(~visible, float("-inf")), dim=-1)


def linear_weights(logits: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """o_t = Σ_{u≤t} (q_t·k_u/√D) v_u: the logits themselves, unnormalised."""
    return logits.masked_fill(~visible, 0.0)


ATTENTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "softmax": softmax_weights,
    "linear": linear_weights,
}

"""The equivariance check (C3, the Theory page's live check): is the logit a function of t − u alone?

For every query token a and key token b, the logit of a query at t against a key at u is compared
with the logit of the same pair at (t + s, u + s). RoPE rotates both by ω·s, which cancels in
q·conj(k): the difference is round-off at any shift. An absolute table adds different rows at the
shifted positions, so the logits move.

The minimal head exposes per-token tables (`query_table`, `key_table`); the transformer does not, so
its first layer's per-token queries and keys are rebuilt here from its weights (later layers see
mixed tokens and have no per-token table). It reads a model and never trains, like the rest of
analysis/; the Theory page reaches it through a cached wrapper (ui.analyses.equivariance).

The model may be on any device: positions are made on its device, and the queries and keys it
gives are taken to the CPU for the float64 logits (Apple's MPS has no float64).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lengen_core.models.encodings import LengthError

SHIFTS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class ShiftCheck:
    shift: int
    max_abs_difference: float | None  # over every token pair and head; None beyond a position table
    logit_scale: float  # max |logit| at the unshifted positions, to read the difference against


def _first_layer_tables(model: torch.nn.Module, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotated queries and keys of every token at one position, first layer: (H, V, D) each."""
    block = model.blocks[0]
    x = model.embed  # (V, C)
    pos = torch.tensor([position], device=x.device)
    table = model.encoding.embed(pos)
    if table is not None:
        x = x + table
    V, C = x.shape
    H = block.n_heads
    q, k, _ = (block.norm_attention(x) @ block.W_QKV).split(C, dim=-1)  # (V, C) each
    q, k = (t.view(V, H, C // H).transpose(0, 1)[None] for t in (q, k))  # (1, H, V, D)
    positions = pos.expand(V)  # every token at the one position
    return model.encoding.rotate(q, positions)[0], model.encoding.rotate(k, positions)[0]  # (H, V, D) each


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def pair_logits(model: torch.nn.Module, t: int, u: int) -> torch.Tensor:
    """Logits of every query token at t against every key token at u: (H, V, V) float64, on the CPU."""
    device = _device(model)
    if hasattr(model, "query_table"):
        q = model.query_table(t)[None]  # (1, V, C)
        k = model.key_table(torch.tensor([u], device=device))[:, 0][None]  # (1, V, C)
    else:
        q, _ = _first_layer_tables(model, t)
        _, k = _first_layer_tables(model, u)
    q, k = q.cpu().double(), k.cpu().double()
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (H, V, V)
    bias = model.encoding.bias(torch.tensor([t], device=device), torch.tensor([u], device=device))  # (H, 1, 1) or None
    return logits if bias is None else logits + bias.cpu().double()


@torch.no_grad()
def check_equivariance(model: torch.nn.Module, t: int, u: int, shifts: tuple[int, ...] = SHIFTS) -> list[ShiftCheck]:
    """Max |logit(t + s, u + s) − logit(t, u)| over token pairs (and heads) for each shift s."""
    reference = pair_logits(model, t, u)
    scale = float(reference.abs().max())
    checks = []
    for shift in shifts:
        try:
            model.encoding.check_length(t + shift + 1)
        except LengthError:
            checks.append(ShiftCheck(shift, None, scale))
            continue
        difference = (pair_logits(model, t + shift, u + shift) - reference).abs().max()
        checks.append(ShiftCheck(shift, float(difference), scale))
    return checks

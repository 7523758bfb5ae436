"""The multi-layer, multi-head transformer of docs/science.md §3 (C8).

Glossary
    B  batch        T  sequence length      Tq  queries      H  heads
    D  head width   C  d_model              V   vocabulary

Pre-norm blocks: x ← x + Attn(LN(x)); x ← x + MLP(LN(x)); then LN and the readout W_U. The same
positional encodings as the minimal head: an additive table on the embeddings, rotation of every
head's queries and keys, or a per-head bias. Attention is computed a block of queries at a time
(`attention.blocked_attention`), so memory grows linearly with the length: keys and values (B, H, T, D) are kept,
the logits only for one block (B, H, block, T).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lengen_core.config import RunConfig
from lengen_core.models.attention import ATTENTIONS, AttentionPattern, Observer, blocked_attention, patterns_of
from lengen_core.models.encodings import PositionalEncoding, build_encoding

ROW_SPAN_ELEMENTS = 1 << 22  # floats of a span's widest temporary (16 MB) when evaluating


def _normal(generator: torch.Generator, *shape: int, std: float) -> nn.Parameter:
    return nn.Parameter(torch.randn(*shape, generator=generator) * std)


class Block(nn.Module):
    def __init__(self, config: RunConfig, generator: torch.Generator, encoding: PositionalEncoding) -> None:
        super().__init__()
        C, H = config.model.d_model, config.model.n_heads
        self.n_heads = H
        self.encoding = encoding  # shared by every block; holds no weights of its own here
        self.weights_from_logits = ATTENTIONS[config.model.attention]
        self.norm_attention = nn.LayerNorm(C)
        self.norm_mlp = nn.LayerNorm(C)
        self.W_QKV = _normal(generator, C, 3 * C, std=1 / math.sqrt(C))
        with torch.no_grad():
            self.W_QKV[:, : 2 * C].mul_(config.model.qk_init)  # queries and keys: the model's qk_init
        self.W_O = _normal(generator, C, C, std=1 / math.sqrt(C))
        self.W_in = _normal(generator, C, 4 * C, std=1 / math.sqrt(C))
        self.W_out = _normal(generator, 4 * C, C, std=1 / math.sqrt(4 * C))

    def forward(self, x: torch.Tensor, query_start: int, observe: Observer | None, layer: int) -> torch.Tensor:
        """Blocks before the last need every position; the last may start at `query_start`. When
        evaluating, the per-position work (projections, rotation, MLP) runs a span of positions at a
        time, each span's result written into its place: memory holds x, q, k, v and the output, plus
        one span's temporaries and one block of logits (blocked_attention)."""
        B, T, C = x.shape
        H, Tq = self.n_heads, T - query_start
        spans = _spans(T, self.rows_per_span(B, C))
        if len(spans) == 1:
            q, k, v = self._project(x, query_start, 0, T)  # (B, H, Tq, D), (B, H, T, D), (B, H, T, D)
        else:
            q, k, v = x.new_empty(B, H, Tq, C // H), x.new_empty(B, H, T, C // H), x.new_empty(B, H, T, C // H)
            for a, b in spans:
                part_q, k[:, :, a:b], v[:, :, a:b] = self._project(x, query_start, a, b)
                q[:, :, max(a, query_start) - query_start : max(b, query_start) - query_start] = part_q
        out = blocked_attention(q, k, v, query_start, self.encoding, self.weights_from_logits, observe, layer)
        del q, k, v  # (B, H, Tq, D) out
        x = x[:, query_start:]  # (B, Tq, C)
        spans = _spans(Tq, self.rows_per_span(B, C))
        if len(spans) == 1:
            return self._residual(x, out)
        result = torch.empty_like(x)
        for a, b in spans:
            result[:, a:b] = self._residual(x[:, a:b], out[:, :, a:b])
        return result  # (B, Tq, C)

    def _project(self, x: torch.Tensor, query_start: int, a: int, b: int) -> tuple[torch.Tensor, ...]:
        """Queries of positions max(a, query_start) … b-1 and keys and values of a … b-1, rotated:
        (B, H, ·, D) each."""
        B, _, C = x.shape
        H = self.n_heads
        positions = torch.arange(a, b, device=x.device)
        q, k, v = (self.norm_attention(x[:, a:b]) @ self.W_QKV).split(C, dim=-1)  # (B, r, C) each
        q, k, v = (t.view(B, b - a, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, r, D)
        first = min(max(a, query_start), b) - a
        return self.encoding.rotate(q[:, :, first:], positions[first:]), self.encoding.rotate(k, positions), v

    def _residual(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """x + attention's output, then + the MLP, for a span of positions: x (B, r, C), out (B, H, r, D)."""
        B, r, C = x.shape
        x = x + out.transpose(1, 2).reshape(B, r, C) @ self.W_O
        hidden = torch.nn.functional.gelu(self.norm_mlp(x) @ self.W_in)  # (B, r, 4C)
        return x + hidden @ self.W_out

    @staticmethod
    def rows_per_span(batch: int, d_model: int) -> int | None:
        """Positions a span holds: None (all) while autograd records, as it keeps every activation anyway;
        otherwise as many as keep the widest temporary, the MLP's hidden layer (B, r, 4C), within
        ROW_SPAN_ELEMENTS."""
        return None if torch.is_grad_enabled() else max(1, ROW_SPAN_ELEMENTS // (batch * 4 * d_model))


def _spans(length: int, rows: int | None) -> list[tuple[int, int]]:
    rows = length if rows is None else rows
    return [(a, min(a + rows, length)) for a in range(0, length, rows)]


class Transformer(nn.Module):
    def __init__(self, config: RunConfig, generator: torch.Generator) -> None:
        super().__init__()
        V, C = config.task.vocab_size, config.model.d_model
        self.config = config
        self.embed = _normal(generator, V, C, std=1.0)
        self.encoding = build_encoding(config.model, generator)
        self.blocks = nn.ModuleList(Block(config, generator, self.encoding) for _ in range(config.model.n_layers))
        self.norm_final = nn.LayerNorm(C)
        self.W_U = _normal(generator, C, V, std=1 / math.sqrt(C))

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def forward(self, tokens: torch.Tensor, query_start: int = 0, observe: Observer | None = None) -> torch.Tensor:
        T = tokens.shape[1]
        self.encoding.check_length(T)
        x = self.embed[tokens]  # (B, T, C)
        table = self.encoding.embed(torch.arange(T, device=tokens.device))
        if table is not None:
            x = x + table
        for layer, block in enumerate(self.blocks):
            last = layer == len(self.blocks) - 1
            # the observer sees every query of every layer: only the last layer may skip queries
            x = block(x, query_start if last and observe is None else 0, observe, layer)  # (B, T or Tq, C)
        if observe is not None:
            x = x[:, query_start:]
        return self.norm_final(x) @ self.W_U  # (B, Tq, V)

    def attend(self, tokens: torch.Tensor, query_start: int = 0) -> list[AttentionPattern]:
        return patterns_of(self, tokens, query_start)

"""The minimal single-head model of docs/science.md §3, and the model registry.

Glossary
    B  batch                     T   sequence length (keys)     Tq  number of queries
    H  heads                     D   head width                 C   d_model
    V  vocabulary size           c   a chunk of key positions

Minimal head: token embedding E (V, C), one head W_Q, W_K, W_V (C, C), readout W_U (C, V);
no residual, no MLP, no normalisation. Every model answers the same questions:

- `forward(tokens, query_start)`: readout logits for queries at positions query_start … T-1;
- `attend(tokens, query_start)`: the attention logits and weights of every head (the probe the
  carrier and heatmaps read);

and the minimal head also exposes its tables per token (`query_table`, `key_table`,
`readout_tables`), which let evaluation at 10^6 tokens run in O(L) memory without a forward pass
over an L×L matrix.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lengen_core.config import RunConfig
from lengen_core.models.attention import ATTENTIONS, AttentionPattern, Observer, blocked_attention, patterns_of
from lengen_core.models.encodings import build_encoding
from lengen_core.models.transformer import Transformer


class MinimalHead(nn.Module):
    def __init__(self, config: RunConfig, generator: torch.Generator) -> None:
        super().__init__()
        V, C = config.task.vocab_size, config.model.d_model
        self.config = config
        self.embed = nn.Parameter(torch.randn(V, C, generator=generator))
        qk = config.model.qk_init  # the same draws at any qk_init, only their scale moves (× 1.0 is exact)
        self.W_Q = nn.Parameter(torch.randn(C, C, generator=generator) / math.sqrt(C) * qk)
        self.W_K = nn.Parameter(torch.randn(C, C, generator=generator) / math.sqrt(C) * qk)
        self.W_V = nn.Parameter(torch.randn(C, C, generator=generator) / math.sqrt(C))
        self.W_U = nn.Parameter(torch.randn(C, V, generator=generator) / math.sqrt(C))
        self.encoding = build_encoding(config.model, generator)
        self.weights_from_logits = ATTENTIONS[config.model.attention]

    @property
    def n_layers(self) -> int:
        return 1

    def _projection(self, tokens: torch.Tensor, weight: torch.Tensor, table: torch.Tensor | None) -> torch.Tensor:
        """x @ weight for x = E[tokens] (+ the position table): (B, t, C). Projected on the V rows
        of E first, then gathered, which costs V·C² instead of B·t·C² (there is no residual)."""
        out = (self.embed @ weight)[tokens]
        return out if table is None else out + table @ weight

    def _run(self, tokens: torch.Tensor, query_start: int, observe: Observer | None) -> torch.Tensor:
        T = tokens.shape[1]
        self.encoding.check_length(T)
        positions = torch.arange(T, device=tokens.device)
        table = self.encoding.embed(positions)  # (T, C) or None
        q_table = None if table is None else table[query_start:]
        q = self._projection(tokens[:, query_start:], self.W_Q, q_table)  # (B, Tq, C)
        q = self.encoding.rotate(q[:, None], positions[query_start:])  # (B, 1, Tq, C)
        k = self.encoding.rotate(self._projection(tokens, self.W_K, table)[:, None], positions)  # (B, 1, T, C)
        v = self._projection(tokens, self.W_V, table)[:, None]  # (B, 1, T, C)
        out = blocked_attention(q, k, v, query_start, self.encoding, self.weights_from_logits, observe)
        return out[:, 0] @ self.W_U  # (B, Tq, V)

    def _tables_pay(self, tokens: torch.Tensor, query_start: int, observe: Observer | None) -> bool:
        """Whether `_last_query` answers this forward: one query (the last position), nobody observing
        the blocks, and per-token tables no larger than the batch's own tensors (V ≤ B and V ≤ C: a table
        of V·T keys against B·T, and B·V·T scores against B·T·C keys)."""
        B, T = tokens.shape
        V, C = self.embed.shape
        return observe is None and query_start == T - 1 and V <= B and V <= C

    def _last_query(self, tokens: torch.Tensor) -> torch.Tensor:
        """The readout logits of the last query (B, 1, V) from per-token tables, as evaluation reads
        them: the scores of every (query token, key token, key position) are one product of the
        (V, C) query table with the (V·T, C) key table; each sequence gathers its T scores from them,
        and its output is its weights summed per key token through the (V, V) readout table, plus the
        position part. The same function as `_run` (no residual: a key's logit and readout depend on
        its token and position alone) without any (B, T, C) tensor, which is what a training step of
        this head mostly spent its time forming and differentiating."""
        B, T = tokens.shape
        V = self.embed.shape[0]
        self.encoding.check_length(T)
        positions = torch.arange(T, device=tokens.device)
        rows = self.encoding.embed(positions)  # (T, C) or None
        keys = self.key_table(positions, rows).flatten(0, 1)  # (V·T, C): token-major
        query = self.query_table(T - 1, None if rows is None else rows[-1:])  # (V, C)
        scores = (query @ keys.T)[tokens[:, -1]]  # (B, V·T)
        logits = scores.gather(1, tokens * T + positions) / math.sqrt(keys.shape[-1])  # (B, T)
        last = positions[-1:]
        bias = self.encoding.bias(last, positions)  # (1, 1, T) or None
        logits = logits if bias is None else logits + bias[0]
        scale = self.encoding.logit_scale(last)  # (1,) or None
        logits = logits if scale is None else logits * scale.to(logits.dtype)
        weights = self.weights_from_logits(logits, None)  # the last query sees every key
        per_token = weights.new_zeros(B, V).scatter_add(1, tokens, weights)  # (B, V): weight on each key token
        token_part, position_part = self.readout_tables(positions, rows)
        out = per_token @ token_part if position_part is None else per_token @ token_part + weights @ position_part
        return out[:, None]  # (B, 1, V)

    def forward(self, tokens: torch.Tensor, query_start: int = 0, observe: Observer | None = None) -> torch.Tensor:
        if self._tables_pay(tokens, query_start, observe):
            return self._last_query(tokens)
        return self._run(tokens, query_start, observe)

    def attend(self, tokens: torch.Tensor, query_start: int = 0) -> list[AttentionPattern]:
        return patterns_of(self, tokens, query_start)

    # Per-token tables for O(L) evaluation of the last query (see lengen_core.analysis.evaluate).

    # `rows`: the encoding's table at those positions (`encoding.embed`), where the caller has formed it
    # already: a learned table's gather is then differentiated once, not once per table.

    def query_table(self, position: int, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Rotated queries of every token at one position: (V, C)."""
        pos = torch.tensor([position], device=self.embed.device)
        x = self.embed
        table = self.encoding.embed(pos) if rows is None else rows
        if table is not None:
            x = x + table  # (V, C)
        q = (x @ self.W_Q)[None, None]  # (1, 1, V, C): V tokens, all at `position`
        return self.encoding.rotate(q, pos.expand(x.shape[0]))[0, 0]  # (V, C)

    def key_table(self, positions: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Rotated keys of every token at each position: (V, c, C)."""
        keys = (self.embed @ self.W_K)[:, None, :]  # (V, 1, C)
        table = self.encoding.embed(positions) if rows is None else rows  # (c, C) or None
        if table is not None:
            keys = keys + (table @ self.W_K)[None]  # (V, c, C)
        else:
            keys = keys.expand(-1, positions.shape[0], -1)  # (V, c, C)
        return self.encoding.rotate(keys[None], positions)[0]  # (V, c, C)

    def readout_tables(self, positions: torch.Tensor,
                       rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What a key contributes to the readout logits: token part (V, V), position part (c, V)."""
        token_part = self.embed @ self.W_V @ self.W_U  # (V, V)
        table = self.encoding.embed(positions) if rows is None else rows
        return token_part, None if table is None else table @ self.W_V @ self.W_U


def build_model(config: RunConfig, generator: torch.Generator) -> nn.Module:
    """Layers 0: the minimal head; layers ≥ 1: the transformer."""
    return MinimalHead(config, generator) if config.model.minimal else Transformer(config, generator)

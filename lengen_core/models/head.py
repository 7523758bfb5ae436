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

    def forward(self, tokens: torch.Tensor, query_start: int = 0, observe: Observer | None = None) -> torch.Tensor:
        return self._run(tokens, query_start, observe)

    def attend(self, tokens: torch.Tensor, query_start: int = 0) -> list[AttentionPattern]:
        return patterns_of(self, tokens, query_start)

    # Per-token tables for O(L) evaluation of the last query (see lengen_core.analysis.evaluate).

    def query_table(self, position: int) -> torch.Tensor:
        """Rotated queries of every token at one position: (V, C)."""
        pos = torch.tensor([position], device=self.embed.device)
        x = self.embed
        table = self.encoding.embed(pos)
        if table is not None:
            x = x + table  # (V, C)
        q = (x @ self.W_Q)[None, None]  # (1, 1, V, C): V tokens, all at `position`
        return self.encoding.rotate(q, pos.expand(x.shape[0]))[0, 0]  # (V, C)

    def key_table(self, positions: torch.Tensor) -> torch.Tensor:
        """Rotated keys of every token at each position: (V, c, C)."""
        keys = (self.embed @ self.W_K)[:, None, :]  # (V, 1, C)
        table = self.encoding.embed(positions)  # (c, C) or None
        if table is not None:
            keys = keys + (table @ self.W_K)[None]  # (V, c, C)
        else:
            keys = keys.expand(-1, positions.shape[0], -1)  # (V, c, C)
        return self.encoding.rotate(keys[None], positions)[0]  # (V, c, C)

    def readout_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What a key contributes to the readout logits: token part (V, V), position part (c, V)."""
        token_part = self.embed @ self.W_V @ self.W_U  # (V, V)
        table = self.encoding.embed(positions)
        return token_part, None if table is None else table @ self.W_V @ self.W_U


def build_model(config: RunConfig, generator: torch.Generator) -> nn.Module:
    """Layers 0: the minimal head; layers ≥ 1: the transformer."""
    return MinimalHead(config, generator) if config.model.minimal else Transformer(config, generator)

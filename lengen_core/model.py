"""The minimal single-head model of SCIENCE.md §3, and the model registry.

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
from dataclasses import dataclass

import torch
from torch import nn

from lengen_core.attention import ATTENTIONS, attention_logits, causal_mask
from lengen_core.config import RunConfig
from lengen_core.encodings import build_encoding


@dataclass(frozen=True)
class AttentionPattern:
    """One layer's attention for a batch: logits and weights (B, H, Tq, T)."""

    layer: int
    logits: torch.Tensor
    weights: torch.Tensor


class MinimalHead(nn.Module):
    def __init__(self, config: RunConfig, generator: torch.Generator) -> None:
        super().__init__()
        V, C = config.task.vocab_size, config.model.d_model
        self.config = config
        self.embed = nn.Parameter(torch.randn(V, C, generator=generator))
        self.W_Q = nn.Parameter(torch.randn(C, C, generator=generator) / math.sqrt(C))
        self.W_K = nn.Parameter(torch.randn(C, C, generator=generator) / math.sqrt(C))
        self.W_V = nn.Parameter(torch.randn(C, C, generator=generator) / math.sqrt(C))
        self.W_U = nn.Parameter(torch.randn(C, V, generator=generator) / math.sqrt(C))
        self.encoding = build_encoding(config.model, generator)
        self.weights_from_logits = ATTENTIONS[config.model.attention]

    @property
    def n_layers(self) -> int:
        return 1

    def _residual(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        self.encoding.check_length(T)
        x = self.embed[tokens]  # (B, T, C)
        table = self.encoding.embed(torch.arange(T, device=tokens.device))  # (T, C) or None
        return x if table is None else x + table

    def _pattern(self, tokens: torch.Tensor, query_start: int) -> tuple[AttentionPattern, torch.Tensor]:
        T = tokens.shape[1]
        positions = torch.arange(T, device=tokens.device)
        query_positions = positions[query_start:]
        x = self._residual(tokens)  # (B, T, C)
        q = (x[:, query_start:] @ self.W_Q)[:, None]  # (B, 1, Tq, C)
        k = (x @ self.W_K)[:, None]  # (B, 1, T, C)
        q = self.encoding.rotate(q, query_positions)
        k = self.encoding.rotate(k, positions)
        logits = attention_logits(q, k, query_positions, positions, self.encoding)  # (B, 1, Tq, T)
        weights = self.weights_from_logits(logits, causal_mask(query_positions, positions))
        v = (x @ self.W_V)[:, None]  # (B, 1, T, C)
        return AttentionPattern(0, logits, weights), v

    def forward(self, tokens: torch.Tensor, query_start: int = 0) -> torch.Tensor:
        pattern, v = self._pattern(tokens, query_start)
        out = (pattern.weights @ v)[:, 0]  # (B, Tq, C)
        return out @ self.W_U  # (B, Tq, V)

    def attend(self, tokens: torch.Tensor, query_start: int = 0) -> list[AttentionPattern]:
        return [self._pattern(tokens, query_start)[0]]

    # Per-token tables for O(L) evaluation of the last query (see lengen_core.evaluate).

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


MODELS = {"minimal": MinimalHead}


def build_model(config: RunConfig, generator: torch.Generator) -> nn.Module:
    return MODELS["minimal"](config, generator)

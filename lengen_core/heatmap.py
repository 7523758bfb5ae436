"""Attention heatmaps (queries × keys) at any length up to `MAX_HEATMAP_LENGTH`, max-pooled.

The full map of one sequence is computed a block of queries at a time, so memory stays at
O(block · L); each block is max-pooled to one row of at most `max_cells` cells, and the argmax key
j*(t) of every query is kept at full resolution: slope 1 (j* = t − k) for a relative rule, a flat
line for a head pinned to an absolute position (C4). Linear attention has signed weights: the map
and the argmax use their magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lengen_core.config import RunConfig
from lengen_core.encodings import LengthError
from lengen_core.evaluate import check_lengths, sequence_tokens

MAX_HEATMAP_LENGTH = 16_384
ZOOM_QUERIES, ZOOM_KEYS = 32, 64
BLOCK_ELEMENTS = 1 << 22  # attention weights held at once


@dataclass(frozen=True)
class Heatmap:
    length: int
    train_length: int
    offset: int
    pool: int  # each cell is the max over pool × pool (queries × keys)
    weights: np.ndarray  # (ceil(L/pool), ceil(L/pool)) pooled attention weights
    argmax_keys: np.ndarray  # (L,) j*(t) for every query t
    zoom: np.ndarray  # (ZOOM_QUERIES, ZOOM_KEYS) raw weights, last queries × last keys
    zoom_first_query: int
    zoom_first_key: int


def pooling_factor(length: int, max_cells: int) -> int:
    return max(1, -(-length // max_cells))


@torch.no_grad()
def attention_heatmap(
    model: torch.nn.Module, config: RunConfig, length: int, max_cells: int = 256, seed: int = 12_345
) -> Heatmap:
    """Attention of one random sequence of `length` (sample 0 of the evaluation sequences)."""
    check_lengths(config, model, [length])
    if length > MAX_HEATMAP_LENGTH:
        raise LengthError(f"heatmap length {length} is beyond the limit of {MAX_HEATMAP_LENGTH}")
    if not 2 <= max_cells <= 1024:
        raise LengthError(f"max cells {max_cells} is out of range: allowed 2 to 1024")
    device = model.embed.device
    tokens = sequence_tokens(seed, length, 1, config.task.vocab_size).to(device)  # (1, L)
    pool = pooling_factor(length, max_cells)
    block = max(pool, BLOCK_ELEMENTS // length // pool * pool)  # queries per forward, a multiple of pool
    rows, argmax = [], []
    for start in range(0, length, block):
        stop = min(start + block, length)
        weights = model.attend(tokens[:, :stop], start)[0].weights[0, 0]  # (q, stop): keys up to the block
        weights = F.pad(weights, (0, length - stop)).abs()  # (q, L); |w| so linear attention pools too
        argmax.append(weights.argmax(dim=1))
        pooled = F.max_pool2d(weights[None, None], pool, pool, ceil_mode=True)  # (1, 1, q/pool, L/pool)
        rows.append(pooled[0, 0])
    zoom_query = max(0, length - ZOOM_QUERIES)
    zoom_key = max(0, length - ZOOM_KEYS)
    zoom = model.attend(tokens, zoom_query)[0].weights[0, 0, :, zoom_key:]  # (≤32, ≤64)
    return Heatmap(
        length=length,
        train_length=config.task.train_length,
        offset=config.task.offset,
        pool=pool,
        weights=torch.cat(rows).cpu().numpy(),
        argmax_keys=torch.cat(argmax).cpu().numpy(),
        zoom=zoom.cpu().numpy(),
        zoom_first_query=zoom_query,
        zoom_first_key=zoom_key,
    )

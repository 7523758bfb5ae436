"""Attention heatmaps (queries × keys) at any length up to `MAX_HEATMAP_LENGTH`, max-pooled, of one
head of one layer; and the mean map of one head over several sequences (`head_map`).

Only the head drawn is kept: one forward pass runs with an observer (lengen_core.models.attention) that
receives each block of queries of every layer, keeps the drawn layer's head, max-pools the block
at once to the drawn resolution and drops it; the layers above the drawn one are not run, and at the drawn
layer only the drawn head is computed (its `only`, attention.drawn_head). Memory is then the forward pass of one sequence,
the blocks of `attention.QUERY_BLOCK_ELEMENTS` logits, and the pooled map (at most max_cells²),
whatever the number of layers and heads; several sequences are run one after another. The argmax
key j*(t) of every query is kept at full resolution: slope 1 (j* = t − k) for a relative rule, a
flat line for a head pinned to an absolute position (C4). Linear attention has signed weights: the
map and the argmax use their magnitude.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lengen_core.analysis.evaluate import check_lengths, sequence_tokens
from lengen_core.config import RunConfig
from lengen_core.models.encodings import LengthError

MAX_HEATMAP_LENGTH = 16_384
ZOOM_QUERIES, ZOOM_KEYS = 32, 64
MAX_HEAD_MAP_SAMPLES = 64
MAX_HEAD_MAP_CELLS = 2_048  # a mean map kept at full resolution to 2,048 tokens: 32 MB in float64


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
    layer: int = 0  # the head drawn
    head: int = 0


def pooling_factor(length: int, max_cells: int) -> int:
    return max(1, -(-length // max_cells))


class _OneHead:
    """An observer of one (layer, head): |weights| max-pooled to `pool` × `pool` cells, the argmax key
    of every query, and the raw weights of the last queries on the last keys."""

    def __init__(self, layer: int, head: int, length: int, pool: int, zoom_query: int, zoom_key: int,
                 device: torch.device) -> None:
        self.layer, self.head, self.length, self.pool = layer, head, length, pool
        self.only = (layer, head)  # the attention computes this head alone at this layer (attention.drawn_head)
        cells = -(-length // pool)
        self.pooled = torch.zeros(cells, cells, device=device)
        self.argmax = torch.zeros(length, dtype=torch.long, device=device)
        self.zoom_query, self.zoom_key = zoom_query, zoom_key
        self.zoom = torch.zeros(length - zoom_query, length - zoom_key, device=device)
        self.seen = 0  # queries recorded

    def __call__(self, layer: int, start: int, logits: torch.Tensor, weights: torch.Tensor) -> None:
        if layer != self.layer:
            return
        raw = weights[0, 0]  # (q, T): one sequence, the drawn head, the only one computed at this layer
        w = raw.abs()
        stop = start + w.shape[0]
        self.argmax[start:stop] = w.argmax(dim=1)
        if stop > self.zoom_query:  # the zoom keeps the sign (linear attention's weights have one)
            first = max(start, self.zoom_query)
            self.zoom[first - self.zoom_query : stop - self.zoom_query] = raw[first - start :, self.zoom_key :]
        cells = self.pooled.shape[1]
        keys = F.pad(w, (0, cells * self.pool - w.shape[1])).view(w.shape[0], cells, self.pool).amax(dim=2)  # (q, cells)
        rows = torch.arange(start, stop, device=w.device) // self.pool
        self.pooled.scatter_reduce_(0, rows[:, None].expand_as(keys), keys, "amax")
        self.seen += w.shape[0]
        if stop == self.length:
            raise _Recorded  # the layers above cannot change this one: skip them


class _Recorded(Exception):
    """Raised by the observer once its layer's last query is recorded."""


def _check(model: torch.nn.Module, config: RunConfig, length: int, max_cells: int, layer: int, head: int,
           most_cells: int = 1024) -> None:
    check_lengths(config, model, [length])
    if length > MAX_HEATMAP_LENGTH:
        raise LengthError(f"heatmap length {length} is beyond the limit of {MAX_HEATMAP_LENGTH}")
    if not 2 <= max_cells <= most_cells:
        raise LengthError(f"max cells {max_cells} is out of range: allowed 2 to {most_cells}")
    layers, heads = max(1, config.model.n_layers), 1 if config.model.minimal else config.model.n_heads
    if not (0 <= layer < layers and 0 <= head < heads):
        raise LengthError(f"layer {layer}, head {head} is not in this model: layers 0 to {layers - 1}, "
                          f"heads 0 to {heads - 1}")


@torch.no_grad()
def _record(model: torch.nn.Module, tokens: torch.Tensor, layer: int, head: int, pool: int) -> _OneHead:
    length = tokens.shape[1]
    recorder = _OneHead(layer, head, length, pool, max(0, length - ZOOM_QUERIES), max(0, length - ZOOM_KEYS),
                        tokens.device)
    try:
        model(tokens, 0, observe=recorder)
    except _Recorded:
        pass
    if recorder.seen != length:  # every query of the drawn layer passes the observer exactly once
        raise RuntimeError(f"recorded {recorder.seen} queries of layer {layer}, expected {length}")
    return recorder


def attention_heatmap(
    model: torch.nn.Module, config: RunConfig, length: int, max_cells: int = 256, seed: int = 12_345,
    layer: int = 0, head: int = 0,
) -> Heatmap:
    """Attention of one random sequence of `length` (sample 0 of the evaluation sequences), of head
    `head` of layer `layer` (the minimal model has one: 0, 0)."""
    _check(model, config, length, max_cells, layer, head)
    device = next(model.parameters()).device
    tokens = sequence_tokens(seed, length, 1, config.task.vocab_size).to(device)  # (1, L)
    pool = pooling_factor(length, max_cells)
    recorded = _record(model, tokens, layer, head, pool)
    return Heatmap(
        length=length,
        train_length=config.task.train_length,
        offset=config.task.offset,
        pool=pool,
        weights=recorded.pooled.cpu().numpy(),
        argmax_keys=recorded.argmax.cpu().numpy(),
        zoom=recorded.zoom.cpu().numpy(),
        zoom_first_query=recorded.zoom_query,
        zoom_first_key=recorded.zoom_key,
        layer=layer,
        head=head,
    )


def head_map(
    model: torch.nn.Module, config: RunConfig, length: int, layer: int, head: int, samples: int = 16,
    max_cells: int = 256, seed: int = 5,
) -> tuple[np.ndarray, int]:
    """The mean over `samples` random sequences of one head's |weights|, each max-pooled to `pool` ×
    `pool` cells (pool 1, the raw mean, when the length fits in `max_cells`): ((cells, cells), pool).
    The sequences run one at a time, so memory is that of one."""
    _check(model, config, length, max_cells, layer, head, MAX_HEAD_MAP_CELLS)
    if not 1 <= samples <= MAX_HEAD_MAP_SAMPLES:
        raise LengthError(f"samples {samples} is out of range: allowed 1 to {MAX_HEAD_MAP_SAMPLES}")
    device = next(model.parameters()).device
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(device)  # (S, L)
    pool = pooling_factor(length, max_cells)
    # summed in float64 on the CPU (the model's device may have no float64: MPS)
    total = sum(_record(model, tokens[i : i + 1], layer, head, pool).pooled.cpu().double() for i in range(samples))
    return (total / samples).numpy(), pool

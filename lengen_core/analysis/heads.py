"""Per-head analysis of any model (docs/science.md §6 for multi-layer models, C8).

Every head's carrier is measured from recorded logits: the mean (unmasked) logit matrix M over
random sequences at the training length, s(Δ) the mean of its diagonal Δ. From it: the argmax
offset over the training range, the Toeplitz fraction and the effective rank of the centred M (a
constant offset of every logit would otherwise make every head rank 1), and the mean
attention weight on the target offset. A **carrier head** selects the offset: argmax offset k and a
mean weight of at least 0.5 on it. With absolute positions, a head is **pinned**
when, beyond the training length, most queries attend to one key inside the training range.

Every statistic is accumulated as the forward pass hands over each block of queries (an observer,
lengen_core.models.attention), a batch of sequences at a time (`sequence.tokens_per_batch`: fewer tokens as
d_model grows, so a batch's activations stay within `evaluate.EVAL_MEMORY_BYTES`): memory is the sums
(a T × T matrix per head at the training length, key counts per head at 4× it) and one batch's forward pass, never
every layer's and head's full attention of every sequence. The model may be on any device: the
sums are kept on the CPU, each block's part summed on the model's device and sent there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.analysis.carrier import effective_rank, toeplitz_fraction
from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.analysis.sequence import tokens_per_batch
from lengen_core.config import RunConfig

CARRIER_WEIGHT = 0.5
PIN_SHARE = 0.5


@dataclass(frozen=True)
class HeadReport:
    layer: int
    head: int
    carrier: np.ndarray  # s(Δ), Δ = 0 … L_train - 1
    argmax_offset: int
    toeplitz_fraction: float
    effective_rank: int
    target_weight: float  # mean share |w_k| / Σ|w| on key t − k over queries t ≥ k
    is_carrier: bool
    pinned_key: int | None  # beyond the training length: the key most queries attend to, if pinned
    pinned_share: float




class _Sums:
    """An observer accumulating, per layer and head: the sum of the logits (at the training length),
    the summed share of |weight| on key t − k for queries t in [k, L), and counts of the argmax
    key of the queries t ≥ L (at 4 × L, for pinning)."""

    def __init__(self, layers: int, heads: int, length: int, train_length: int, offset: int, pinning: bool) -> None:
        self.length, self.train_length, self.offset, self.pinning = length, train_length, offset, pinning
        self.logits = None if pinning else torch.zeros(layers, heads, length, length, dtype=torch.float64)
        self.share = torch.zeros(layers, heads, dtype=torch.float64)
        self.keys = torch.zeros(layers, heads, length, dtype=torch.float64) if pinning else None
        self.samples = 0

    def __call__(self, layer: int, start: int, logits: torch.Tensor, weights: torch.Tensor) -> None:
        stop = start + logits.shape[2]
        if self.pinning:
            first = max(start, self.train_length)
            if first < stop:
                keys = weights[:, :, first - start :].abs().argmax(dim=-1)  # (B, H, queries beyond)
                heads = keys.shape[1]
                flat = (torch.arange(heads, device=keys.device)[None, :, None] * self.length + keys).flatten()
                self.keys[layer] += torch.bincount(flat.cpu(), minlength=heads * self.length).view(heads, -1)
            return
        self.logits[layer, :, start:stop] += logits.sum(dim=0).cpu().double()  # float64 on the CPU (not on MPS)
        first, k = max(start, self.offset), self.offset
        if first < stop:
            w = weights[:, :, first - start :]  # (B, H, q, T): a view, queries t = first … stop-1
            on_target = w.diagonal(offset=first - k, dim1=2, dim2=3).abs()  # key t − k of each query: (B, H, q)
            total = torch.linalg.vector_norm(w, ord=1, dim=-1)  # Σ|w| without a |w| copy: linear attention too
            self.share[layer] += (on_target / total).sum(dim=(0, 2)).cpu().double()


@torch.no_grad()
def _accumulate(model: torch.nn.Module, config: RunConfig, length: int, samples: int, seed: int,
                pinning: bool) -> _Sums:
    device = next(model.parameters()).device
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(device)
    layers = max(1, config.model.n_layers)
    heads = 1 if config.model.minimal else config.model.n_heads
    sums = _Sums(layers, heads, length, config.task.train_length, config.task.offset, pinning)
    batch = max(1, tokens_per_batch(config) // length)  # fewer sequences a pass as d_model grows
    for begin in range(0, samples, batch):
        model(tokens[begin : begin + batch], 0, observe=sums)
    sums.samples = samples
    return sums


def _pinning(model: torch.nn.Module, config: RunConfig, samples: int, seed: int) -> dict[tuple[int, int], tuple]:
    """(layer, head) -> (most common argmax key of queries t ≥ L_train at 4 × L_train, its share)."""
    length = 4 * config.task.train_length
    try:
        model.encoding.check_length(length)
    except ValueError:
        return {}
    counts = _accumulate(model, config, length, samples, seed, pinning=True).keys  # (layers, H, 4L)
    total = counts.sum(dim=-1)  # (layers, H)
    modes = counts.argmax(dim=-1)
    return {(layer, head): (int(modes[layer, head]), float(counts[layer, head, modes[layer, head]] / total[layer, head]))
            for layer in range(counts.shape[0]) for head in range(counts.shape[1])}


def analyse_heads(model: torch.nn.Module, config: RunConfig, samples: int = 256, seed: int = 11) -> list[HeadReport]:
    L, k = config.task.train_length, config.task.offset
    sums = _accumulate(model, config, L, samples, seed, pinning=False)
    mean_logits = (sums.logits / samples).numpy()  # (layers, H, T, T)
    targets = (sums.share / (samples * (L - k))).numpy()  # (layers, H)
    rows = []
    for layer in range(mean_logits.shape[0]):
        for head in range(mean_logits.shape[1]):
            matrix = mean_logits[layer, head]
            carrier = np.array([np.diagonal(matrix, -d).mean() for d in range(L)])
            singular = np.linalg.svd(matrix - matrix.mean(), compute_uv=False)  # centred, as for one head
            rows.append((layer, head, carrier, matrix, singular, float(targets[layer, head])))
    pins = _pinning(model, config, max(16, samples // 4), seed)
    reports = []
    for layer, head, carrier, matrix, singular, weight in rows:
        argmax = int(np.argmax(carrier))
        key, share = pins.get((layer, head), (None, 0.0))
        pinned = key is not None and key < L and share >= PIN_SHARE
        reports.append(
            HeadReport(
                layer=layer,
                head=head,
                carrier=carrier,
                argmax_offset=argmax,
                toeplitz_fraction=toeplitz_fraction(matrix),
                effective_rank=effective_rank(singular),
                target_weight=weight,
                is_carrier=argmax == k and weight >= CARRIER_WEIGHT,
                pinned_key=key if pinned else None,
                pinned_share=share,
            )
        )
    return reports

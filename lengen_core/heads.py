"""Per-head analysis of any model (docs/science.md §6 for multi-layer models, C8).

Every head's carrier is measured from recorded logits: the mean (unmasked) logit matrix M over
random sequences at the training length, s(Δ) the mean of its diagonal Δ. From it: the argmax
offset over the training range, the Toeplitz fraction and the effective rank of the centred M (a
constant offset of every logit would otherwise make every head rank 1), and the mean
attention weight on the target offset. A **carrier head** selects the offset: argmax offset k and a
mean weight of at least 0.5 on it. With absolute positions, a head is **pinned**
when, beyond the training length, most queries attend to one key inside the training range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.carrier import effective_rank, toeplitz_fraction
from lengen_core.config import RunConfig
from lengen_core.evaluate import sequence_tokens

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


@torch.no_grad()
def _patterns(model: torch.nn.Module, config: RunConfig, length: int, samples: int, seed: int):
    device = next(model.parameters()).device
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(device)
    return model.attend(tokens, 0)


def _pinning(model: torch.nn.Module, config: RunConfig, samples: int, seed: int) -> dict[tuple[int, int], tuple]:
    """(layer, head) -> (most common argmax key of queries t ≥ L_train at 4 × L_train, its share)."""
    L = config.task.train_length
    length = 4 * L
    try:
        model.encoding.check_length(length)
    except ValueError:
        return {}
    found = {}
    for pattern in _patterns(model, config, length, samples, seed):
        keys = pattern.weights[:, :, L:].abs().argmax(dim=-1)  # (S, H, queries beyond)
        for head in range(keys.shape[1]):
            mode = int(keys[:, head].flatten().mode().values)
            found[pattern.layer, head] = (mode, float((keys[:, head] == mode).float().mean()))
    return found


def analyse_heads(model: torch.nn.Module, config: RunConfig, samples: int = 256, seed: int = 11) -> list[HeadReport]:
    L, k = config.task.train_length, config.task.offset
    t = torch.arange(k, L)
    rows = []
    for pattern in _patterns(model, config, L, samples, seed):
        mean_logits = pattern.logits.mean(dim=0).double().cpu().numpy()  # (H, T, T)
        queries = pattern.weights.abs()[:, :, t]  # (S, H, q, T); |w| so linear attention counts too
        share = queries[..., t - k].diagonal(dim1=2, dim2=3) / queries.sum(dim=-1)  # (S, H, q)
        target = share.mean(dim=(0, 2)).cpu()  # (H,)
        for head in range(mean_logits.shape[0]):
            matrix = mean_logits[head]
            carrier = np.array([np.diagonal(matrix, -d).mean() for d in range(L)])
            singular = np.linalg.svd(matrix - matrix.mean(), compute_uv=False)  # centred, as for one head
            rows.append((pattern.layer, head, carrier, matrix, singular, float(target[head])))
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

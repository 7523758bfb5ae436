"""Evaluation by forward pass, for what the per-token tables of the minimal head cannot do:
the `shift` task (every position t ≥ k answers x[t-k]) and the multi-layer transformer.

Memory grows linearly with the length: the transformer attends a block of queries at a time, and
sequences go through in batches of `tokens_per_batch(config)` tokens: at most `TOKENS_PER_BATCH`,
and at most as many as keep a forward pass's activations (`FORWARD_FLOATS_PER_TOKEN` × d_model
floats a token) within `evaluate.EVAL_MEMORY_BYTES`, but never less than one sequence (at the
limits, 8 192 tokens at d_model 512: about 335 MB). The tokens are drawn once as uint8 (V ≤ 256),
sent to the device as `evaluate.to_device` does, and made int64 a batch at a time; the hits are
kept as booleans. Reported per length:
accuracy over the supervised positions, accuracy beyond the training length (t ≥ L_train), accuracy
by position (averaged into at most `POSITION_BINS` bins), and, for the head that attends most to the
target offset (the carrier head), its mean weight on the target and the argmax key of the last query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.analysis.evaluate import (
    EVAL_MEMORY_BYTES,
    FLOAT,
    check_lengths,
    check_sampling,
    check_sweep,
    sequence_tokens,
    to_device,
    token_dtype,
    wilson_interval,
)
from lengen_core.config import RunConfig
from lengen_core.models.encodings import LengthError
from lengen_core.tasks import query_start, targets_of

MAX_SEQUENCE_LENGTH = 8_192
TOKENS_PER_BATCH = 1 << 15
FORWARD_FLOATS_PER_TOKEN = 20  # per d_model: residual, projections and MLP alive at once (serving.budget._forward)
POSITION_BINS = 256


def tokens_per_batch(config: RunConfig) -> int:
    """Tokens in one forward pass: TOKENS_PER_BATCH, fewer where d_model would take the activations
    past EVAL_MEMORY_BYTES (a batch still holds at least one sequence)."""
    per_token = FLOAT * FORWARD_FLOATS_PER_TOKEN * config.model.d_model
    return max(1, min(TOKENS_PER_BATCH, EVAL_MEMORY_BYTES // per_token))


@dataclass(frozen=True)
class SequenceReport:
    length: int
    samples: int
    accuracy: float  # supervised positions (t ≥ k for shift, the last for retrieval)
    accuracy_low: float
    accuracy_high: float
    accuracy_beyond: float | None  # positions t ≥ L_train; None when the length is within training
    positions: np.ndarray  # first position of each bin
    accuracy_by_position: np.ndarray  # mean accuracy in each bin
    target_mass: float  # carrier head: mean share |w_k| / Σ|w| of attention on key t - k
    argmax_key: int  # carrier head: most common argmax key of the last query
    carrier_layer: int
    carrier_head: int
    seconds: float


class _TargetWeights:
    """An attention observer: per (layer, head) the summed weight on key t − k over the supervised
    queries t ≥ first, and the argmax key of the last query, without keeping any attention matrix."""

    def __init__(self, n_layers: int, n_heads: int, offset: int, first: int, length: int) -> None:
        self.offset, self.first, self.length = offset, first, length
        self.mass = torch.zeros(n_layers, n_heads)
        self.last_argmax: dict[int, torch.Tensor] = {}

    def __call__(self, layer: int, start: int, logits: torch.Tensor, weights: torch.Tensor) -> None:
        low, high = max(start, self.first), start + weights.shape[2]
        if low < high:  # a block may end before the first supervised query
            rows = weights[:, :, low - start :]  # (B, H, q, T): a view, queries t = low … high-1
            # key t − k of query t is the diagonal starting at key low − k (low ≥ first ≥ k): a view too
            target = rows.diagonal(offset=low - self.offset, dim1=2, dim2=3).abs()  # (B, H, q)
            total = torch.linalg.vector_norm(rows, ord=1, dim=-1)  # Σ|w| without a |w| copy: linear attention too
            self.mass[layer] += (target / total).sum(dim=(0, 2)).cpu()
        if start + weights.shape[2] == self.length:
            self.last_argmax[layer] = weights[:, :, -1].abs().argmax(dim=-1).T.cpu()  # (H, B)


@torch.no_grad()
def evaluate_sequence(
    model: torch.nn.Module, config: RunConfig, lengths: Sequence[int], samples: int = 128, seed: int = 12_345
) -> list[SequenceReport]:
    check_sampling(samples, seed)
    check_lengths(config, model, lengths)
    check_sweep(lengths, samples)
    too_long = [n for n in lengths if n > MAX_SEQUENCE_LENGTH]
    if too_long:
        raise LengthError(
            f"length {too_long[0]} is beyond {MAX_SEQUENCE_LENGTH}, the limit for full-sequence evaluation"
        )
    task, device = config.task, next(model.parameters()).device
    reports = []
    for length in lengths:
        start_time = time.perf_counter()
        first = query_start(task, length)
        narrow = sequence_tokens(seed, length, samples, task.vocab_size, dtype=token_dtype(task.vocab_size))
        tokens = to_device(narrow, device)  # (S, L)
        batch = max(1, tokens_per_batch(config) // length)
        correct, argmax = [], []
        observer = _TargetWeights(model.n_layers, config.model.n_heads, task.offset, first, length)
        for begin in range(0, samples, batch):
            part = tokens[begin : begin + batch].long()
            logits = model(part, query_start=first, observe=observer)  # (b, Tq, V)
            correct.append(logits.argmax(-1) == targets_of(task, part))  # (b, Tq) booleans
            argmax.append(torch.stack([observer.last_argmax[layer] for layer in range(model.n_layers)]))
            del part, logits
        hits = torch.cat(correct)  # (S, Tq)
        del correct
        mass = observer.mass / (samples * (length - first))  # (layers, H): mean over supervised queries
        layer, head = divmod(int(mass.argmax()), mass.shape[1])
        keys = torch.cat(argmax, dim=-1)[layer, head]  # (S,)
        beyond = hits[:, max(0, task.train_length - first) :]
        successes = int(hits.sum())
        low, high = wilson_interval(successes, hits.numel())
        bins = np.array_split(np.arange(hits.shape[1]), min(POSITION_BINS, hits.shape[1]))
        by_position = (hits.sum(dim=0) / samples).cpu().numpy()
        reports.append(
            SequenceReport(
                length=length,
                samples=samples,
                accuracy=successes / hits.numel(),
                accuracy_low=low,
                accuracy_high=high,
                accuracy_beyond=int(beyond.sum()) / beyond.numel() if length > task.train_length and beyond.numel() else None,
                positions=np.array([first + b[0] for b in bins]),
                accuracy_by_position=np.array([by_position[b].mean() for b in bins]),
                target_mass=float(mass[layer, head]),
                argmax_key=int(keys.mode().values),
                carrier_layer=layer,
                carrier_head=head,
                seconds=time.perf_counter() - start_time,
            )
        )
    return reports

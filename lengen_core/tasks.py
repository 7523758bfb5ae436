"""Tasks of docs/science.md §2. Every random stream comes from an explicit `torch.Generator`.

retrieval: tokens x_0 … x_{L-1} iid uniform over V; the query is the last position and the answer
is x_{L-1-k}. Loss and accuracy at the query only.
shift: the same tokens; every position t ≥ k predicts x_{t-k} (full-sequence supervision).
"""

from __future__ import annotations

import torch

from lengen_core.config import TaskConfig


def sample_tokens(batch_size: int, length: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(vocab_size, (batch_size, length), generator=generator, device=generator.device)


def retrieval_targets(tokens: torch.Tensor, offset: int) -> torch.Tensor:
    return tokens[:, -1 - offset]  # (B,)


def training_length(task: TaskConfig, generator: torch.Generator) -> int:
    """The length of one training batch: fixed, or uniform on [offset+1, train_length]."""
    if task.length_mode == "fixed":
        return task.train_length
    low, high = task.offset + 1, task.train_length
    return int(torch.randint(low, high + 1, (1,), generator=generator, device=generator.device).item())


def query_start(task: TaskConfig, length: int) -> int:
    """The first supervised position: the last one for retrieval, the offset for shift."""
    return length - 1 if task.task == "retrieval" else task.offset


def targets_of(task: TaskConfig, tokens: torch.Tensor) -> torch.Tensor:
    """Answers at the supervised positions query_start … T-1: (B, Tq)."""
    if task.task == "retrieval":
        return retrieval_targets(tokens, task.offset)[:, None]  # (B, 1)
    return tokens[:, : tokens.shape[1] - task.offset]  # (B, T-k): position t answers x[t-k]


def sample_batch(task: TaskConfig, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (B, T) and the answers at the supervised positions (B, Tq)."""
    length = training_length(task, generator)
    tokens = sample_tokens(batch_size, length, task.vocab_size, generator)
    return tokens, targets_of(task, tokens)

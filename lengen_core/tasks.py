"""Tasks of SCIENCE.md §2. Every random stream comes from an explicit `torch.Generator`.

retrieval: tokens x_0 … x_{L-1} iid uniform over V; the query is the last position and the answer
is x_{L-1-k}. Loss and accuracy at the query only.
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


def sample_batch(task: TaskConfig, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (B, T) and the retrieval answers (B,)."""
    length = training_length(task, generator)
    tokens = sample_tokens(batch_size, length, task.vocab_size, generator)
    return tokens, retrieval_targets(tokens, task.offset)

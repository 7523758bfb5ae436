"""Tasks of docs/science.md §2. Every random stream comes from an explicit `torch.Generator`.

retrieval: tokens x_0 … x_{L-1} iid uniform over V; the query is the last position and the answer
is x_{L-1-k}. Loss and accuracy at the query only.
shift: the same tokens; every position t ≥ k predicts x_{t-k} (full-sequence supervision).

The delay tasks keep the length fixed at L = the training length and move the source instead: each
sequence draws a delay d from the run's delays, and the query at the last position answers the
source token x_{L-1-d}. The query has to be told which d (a run trains on several), and the telling
must mean something at a delay it never saw, so no token names a delay:

delay-copy (full copy): content tokens are 0 … V-2 and V-1 is the filler. The d positions after the
source (the query among them) hold the filler: the source is the last content token, and the silence
after it is d long.
selective-copy: content tokens are 0 … V/2-1 and token a + V/2 is a's marked copy. Every position holds
an unmarked content token but the source, which holds its marked copy; the answer is the unmarked
token. The marker says which token to recall, whatever the delay.
"""

from __future__ import annotations

import torch

from lengen_core.config import DELAY_TASKS, TaskConfig


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
    """The first supervised position: the last one for retrieval and the delay tasks, the offset for shift."""
    return task.offset if task.task == "shift" else length - 1


def content_vocab(task: TaskConfig) -> int:
    """How many tokens can be an answer: V for retrieval and shift, fewer for the delay tasks (the
    filler, or the marked copies, are never one). Chance is one over it."""
    if task.task == "delay-copy":
        return task.vocab_size - 1
    if task.task == "selective-copy":
        return task.vocab_size // 2
    return task.vocab_size


def delay_tokens(task: TaskConfig, delays: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of the training length, sequence i with its source `delays[i]` back from the last
    position (module docstring): tokens (B, L) and the answers (B, 1)."""
    if task.task not in DELAY_TASKS:
        raise ValueError(f"delay_tokens makes the {' and '.join(DELAY_TASKS)} tasks' sequences, not {task.task}'s")
    L, B = task.train_length, delays.shape[0]
    tokens = sample_tokens(B, L, content_vocab(task), generator)
    delays = delays.to(tokens.device)
    if int(delays.min()) < 1 or int(delays.max()) >= L:
        raise ValueError(f"delays must be 1 to {L - 1} at length {L}")
    positions = torch.arange(L, device=tokens.device)
    source = (L - 1 - delays)[:, None]  # (B, 1)
    answers = tokens.gather(1, source)  # (B, 1)
    if task.task == "delay-copy":
        tokens = torch.where(positions[None] > source, task.vocab_size - 1, tokens)  # the silence after the source
    else:
        tokens = tokens.scatter(1, source, answers + task.vocab_size // 2)  # the marked copy
    return tokens, answers


def training_delays(task: TaskConfig, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """One delay per sequence, uniform over the run's delays: (B,)."""
    choices = torch.tensor(task.delay_set)
    return choices[torch.randint(len(choices), (batch_size,), generator=generator, device=generator.device).cpu()]


def targets_of(task: TaskConfig, tokens: torch.Tensor) -> torch.Tensor:
    """Answers at the supervised positions query_start … T-1: (B, Tq)."""
    if task.task in DELAY_TASKS:
        raise ValueError(f"the {task.task} task's answers come with its sequences (delay_tokens), not from iid tokens")
    if task.task == "retrieval":
        return retrieval_targets(tokens, task.offset)[:, None]  # (B, 1)
    return tokens[:, : tokens.shape[1] - task.offset]  # (B, T-k): position t answers x[t-k]


def sample_batch(task: TaskConfig, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (B, T) and the answers at the supervised positions (B, Tq)."""
    if task.task in DELAY_TASKS:
        return delay_tokens(task, training_delays(task, batch_size, generator), generator)
    length = training_length(task, generator)
    tokens = sample_tokens(batch_size, length, task.vocab_size, generator)
    return tokens, targets_of(task, tokens)

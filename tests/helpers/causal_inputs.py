"""Inputs for causality properties: a batch of tokens and a copy whose every token after `t` differs."""

from __future__ import annotations

import torch


def tokens_with_changed_future(vocab_size: int, length: int, t: int, seed: int, batch: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(vocab_size, (batch, length), generator=generator)
    changed = tokens.clone()
    shift = torch.randint(1, vocab_size, (batch, length - t - 1), generator=generator)
    changed[:, t + 1 :] = (tokens[:, t + 1 :] + shift) % vocab_size
    assert (changed[:, t + 1 :] != tokens[:, t + 1 :]).all() and (changed[:, : t + 1] == tokens[:, : t + 1]).all()
    return tokens, changed

"""Counting how often a Gaussian readout picks the target (the prediction's accuracy, SCIENCE.md §6).

Scores centre[a, c, y] + noise[a, y, k] for query token a, target c, candidate y and draw k; the
prediction is right when the argmax over y is c. Counted against each target's best rival, never
through the (V_a, V_c, K, V_y) score tensor, with an exact tie-break, so the count equals the plain
argmax's (tests/unit/test_prediction_speed_equivalence.py).
"""

from __future__ import annotations

import math

import torch

GAUSSIAN_DRAWS = 4_096


def standard_draws(vocab_size: int, seed: int = 0) -> torch.Tensor:
    """The (K, V) standard normal draws every accuracy estimate shares: the same inputs, the same answer."""
    stream = torch.Generator().manual_seed(seed)
    return torch.randn(GAUSSIAN_DRAWS, vocab_size, generator=stream, dtype=torch.float64)


def _best_rival(centre: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """max_{y≠c} centre[a, c, y] + noise[a, y, k]: (V_a, V_c, K), a running maximum over y, K innermost."""
    V = centre.shape[-1]
    rivals = centre.clone()
    rivals.diagonal(dim1=1, dim2=2).fill_(-math.inf)  # (V_a, V_c, V_y): y = c is no rival
    best = rivals[:, :, 0, None] + noise[:, None, 0, :]  # (V_a, V_c, K)
    candidate = torch.empty_like(best)
    for y in range(1, V):
        torch.add(rivals[:, :, y, None], noise[:, None, y, :], out=candidate)
        torch.maximum(best, candidate, out=best)
    return best


def _best_shared_rival(rival_centre: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The same when the rivals' centres do not depend on c (rival_centre (V_a, V_y)): per draw the
    best score is every c's best rival but its own, whose best rival is the second best."""
    V = rival_centre.shape[-1]
    scores = rival_centre[:, :, None] + noise  # (V_a, V_y, K)
    top, first = scores.max(dim=1, keepdim=True)  # (V_a, 1, K)
    runner_up = scores.scatter_(1, first, -math.inf).amax(dim=1, keepdim=True)  # (V_a, 1, K)
    return top.expand(-1, V, -1).scatter(1, first, runner_up)  # (V_a, V_c, K)


DRAW_BLOCK = 1_024  # draws per pass: the (V, V, block) float64 buffers stay in cache


def argmax_hits(centre: torch.Tensor, noise: torch.Tensor) -> int:
    """How many (a, c, k) have argmax_y (centre[a, c, y] + noise[a, y, k]) = c; noise (V_a, V_y, K).

    Equal to counting torch.argmax over the (V_a, V_c, K, V_y) scores, without building them: the
    target against its best rival, then an exact tie-break for the rare draws where the two are
    equal (argmax takes the first maximum).
    """
    V = centre.shape[-1]
    others = ~torch.eye(V, dtype=torch.bool)
    rival_centre = centre[:, (torch.arange(V) + 1) % V, torch.arange(V)]  # (V_a, V_y): token y against c = y+1
    shared = torch.equal(centre[:, others], rival_centre[:, None, :].expand(-1, V, -1)[:, others])  # e.g. ideal readout
    own_centre = centre.diagonal(dim1=1, dim2=2)[:, :, None]  # (V_a, V_c, 1)
    hits = 0
    for begin in range(0, noise.shape[-1], DRAW_BLOCK):
        block = noise[:, :, begin : begin + DRAW_BLOCK]  # (V_a, V_y, k)
        best = _best_shared_rival(rival_centre, block) if shared else _best_rival(centre, block)
        own = own_centre + block  # (V_a, V_c, k)
        hits += int((own > best).sum())
        a, c, k = (own == best).nonzero().unbind(1)
        if len(a):
            hits += int(((centre[a, c] + block[a, :, k]).argmax(-1) == c).sum())
    return hits

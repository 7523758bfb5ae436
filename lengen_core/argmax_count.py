"""The readout's random part, and how often its argmax is the target (the prediction's accuracy, SCIENCE.md §6).

Scores centre[a, c, y] + noise[a, y, k] for query token a, target c, candidate y and draw k; the
prediction is right when the argmax over y is c. The noise is the random keys' part of the scores:
a Gaussian for the many keys that each weigh little (`gaussian_noise`) plus the few keys that weigh
most (`DominantKeys`, found during the sweep over the keys), with their tokens drawn one by one
(`dominant_noise`): a sum that a handful of keys dominate is far from Gaussian in its tail, and that
tail decides the argmax.

The argmax is counted against each target's best rival, never through the (V_a, V_c, K, V_y) score
tensor, with an exact tie-break, so the count equals the plain argmax's
(tests/unit/test_prediction_speed_equivalence.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

GAUSSIAN_DRAWS = 4_096


@dataclass(frozen=True)
class Draws:
    """The random numbers every accuracy estimate shares: the same inputs, the same answer."""

    normal: torch.Tensor  # (K, V) standard normal, for the Gaussian part
    tokens: torch.Tensor  # (M, K) uniform key tokens, for the M dominant keys
    indicator: torch.Tensor  # (V, M, K) float64: 1 where tokens[m, k] is the token


def standard_draws(vocab_size: int, dominant_keys: int = 0, seed: int = 0) -> Draws:
    stream = torch.Generator().manual_seed(seed)
    normal = torch.randn(GAUSSIAN_DRAWS, vocab_size, generator=stream, dtype=torch.float64)
    tokens = torch.randint(vocab_size, (dominant_keys, GAUSSIAN_DRAWS), generator=stream)
    indicator = torch.zeros(vocab_size, dominant_keys, GAUSSIAN_DRAWS, dtype=torch.float64)
    return Draws(normal, tokens, indicator.scatter_(0, tokens[None], 1.0))  # (V, M, K)


class DominantKeys:
    """Per query token a, the M keys swept so far with the largest max_b |f_ab(u)|, their weights
    f_ab(u) and position readout rows RP[u]: a running top-M, merged block by block."""

    def __init__(self, V: int, count: int) -> None:
        self.score = torch.full((V, count), -math.inf)  # (V_a, M) max_b |f_ab(u)|, descending
        self.offsets = torch.full((V, count), -1)  # (V_a, M) Δ
        self.votes = torch.zeros(V, V, count)  # (V_a, V_b, M)
        self.readout = torch.zeros(V, count, V)  # (V_a, M, V_y)

    def add(self, f: torch.Tensor, size: torch.Tensor, readout: torch.Tensor | None, begin: int) -> None:
        """Keys Δ = begin … with weights f (V_a, V_b, c), |f| in `size` (f itself when f ≥ 0), readout rows (c, V_y)."""
        V, count = f.shape[0], self.score.shape[1]
        score = size.amax(dim=1)  # (V_a, c): max_b |f_ab(u)|, one cheap pass (a norm over b is ten times slower)
        if not bool((score.amax(dim=1) > self.score[:, -1]).any()):
            return  # no key of this block displaces a dominant one
        score, index = score.topk(min(count, f.shape[-1]), dim=1)  # (V_a, m)
        votes = torch.cat((self.votes, f.gather(2, index[:, None, :].expand(-1, V, -1))), dim=2)  # (V_a, V_b, M+m)
        rows = torch.zeros(V, index.shape[1], V) if readout is None else readout[index]  # (V_a, m, V_y)
        score, keep = torch.cat((self.score, score), dim=1).topk(count, dim=1)  # (V_a, M)
        self.score = score
        self.offsets = torch.cat((self.offsets, index + begin), dim=1).gather(1, keep)
        self.votes = votes.gather(2, keep[:, None, :].expand(-1, V, -1))
        self.readout = torch.cat((self.readout, rows), dim=1).gather(1, keep[:, :, None].expand(-1, -1, V))


def gaussian_noise(covariance: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
    """Draws (V_a, V_y, K) of N(0, covariance[a]) from standard normals (K, V_y): covariance (V_a, V_y, V_y)."""
    V = covariance.shape[-1]
    jitter = 1e-9 * covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1).clamp_min(1e-300)
    values, vectors = torch.linalg.eigh(covariance + jitter[:, None, None] * torch.eye(V, dtype=covariance.dtype))
    root = vectors * values.clamp_min(0).sqrt()[:, None, :]  # (V_a, V_y, V_y)
    return (root.reshape(-1, V) @ normal.T).view(covariance.shape[0], V, -1)  # (V_a, V_y, K)


def dominant_shares(votes: torch.Tensor, draws: Draws) -> torch.Tensor:
    """Each token's share Σ_m f_{ab}(u_m)·[x_mk = b] of the dominant keys' weight, per draw: (V_b, V_a, K).

    votes (V_a, V_b, M): f_ab(u_m) of each query token's M dominant keys. One GEMM per token
    against the draws' indicator, not a scatter (several times slower on the CPU).
    """
    return torch.bmm(votes.permute(1, 0, 2), draws.indicator)  # (V_b, V_a, K)


def dominant_noise(
    shares: torch.Tensor, readout: torch.Tensor, votes: torch.Tensor, positional: torch.Tensor | None, draws: Draws
) -> torch.Tensor:
    """Σ_m f_{a x_mk}(u_m)·(R[x_mk] + RP[u_m]) for each draw k of the tokens x: (V_a, V_y, K).

    shares (V_b, V_a, K) from dominant_shares; readout R (V_b, V_y); votes (V_a, V_b, M) and
    positional (V_a, M, V_y), the dominant keys' RP[u_m], or None.
    """
    V_b, V_a, K = shares.shape
    if not torch.equal(readout, torch.eye(V_b, dtype=readout.dtype)):  # the ideal readout takes the shares as they are
        shares = (readout.T @ shares.view(V_b, -1)).view(-1, V_a, K)  # (V_y, V_a, K)
    noise = shares.transpose(0, 1)  # (V_a, V_y, K)
    if positional is not None:
        values = votes.transpose(1, 2).gather(2, draws.tokens[None].expand(V_a, -1, -1))  # (V_a, M, K): f_{a x_mk}(u_m)
        noise = noise + torch.bmm(positional.transpose(1, 2), values)  # (V_a, V_y, K)
    return noise


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

"""The readout's random part, and how often its argmax is the target (the prediction's accuracy, docs/science.md §8).

Scores centre[a, c, y] + noise[a, y, k] for query token a, target c, candidate y and draw k; the
prediction is right when the argmax over y is c. The noise is the random keys' part of the scores:
a Gaussian for the many keys that each weigh little plus the few keys that weigh most
(`DominantKeys`, found during the sweep over the keys) with their tokens drawn one by one
(`readout_noise`): a sum that a handful of keys dominate is far from Gaussian in its tail, and that
tail decides the argmax.

The argmax is counted against each target's best rival, never through the (V_a, V_c, K, V_y) score
tensor; the rival search may run in float32, but ties and margins within float32 rounding are
decided by the float64 scores, so the count equals the plain float64 argmax's
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


def standard_draws(vocab_size: int, dominant_keys: int = 0, seed: int = 0, count: int = GAUSSIAN_DRAWS) -> Draws:
    """`count` draws (fewer: a cheaper, noisier accuracy, standard error √(a(1−a)/(count·V²)) at most)."""
    stream = torch.Generator().manual_seed(seed)
    normal = torch.randn(count, vocab_size, generator=stream, dtype=torch.float64)
    tokens = torch.randint(vocab_size, (dominant_keys, count), generator=stream)
    indicator = torch.zeros(vocab_size, dominant_keys, count, dtype=torch.float64)
    return Draws(normal, tokens, indicator.scatter_(0, tokens[None], 1.0))  # (V, M, K)


class DominantKeys:
    """Per query row (a query token, or one of its target groups: dilution._query_rows), the M keys
    swept so far with the largest max_b |f_ab(u)|: their score, offset Δ, weights f_ab(u) and position
    readout rows RP[u]. Each block's own top M is set aside and the sets are merged when asked for
    (`top`) or when MERGE_BLOCKS have piled up.

    The keys set aside are zeroed in the block (`add`), so the caller's sums hold only the other
    keys; a key pushed out of the top M at a merge comes back through `evicted`, to be added to those
    sums. The rest's sums are thus sums, never a total less the heaviest keys: a key e^40 above the
    rest would leave nothing of it in float64 after the subtraction."""

    MERGE_BLOCKS = 16

    def __init__(self, V: int, count: int, rows: int | None = None) -> None:
        R = V if rows is None else rows
        self.count = count
        self.score = torch.full((R, count), -math.inf)  # (R, M) max_b |f_ab(u)|
        self.offsets = torch.full((R, count), -1)  # (R, M) Δ; −1: no key yet
        self.votes = torch.zeros(R, V, count)  # (R, V_b, M)
        self.readout = torch.zeros(R, count, V)  # (R, M, V_y); zero without additive positions
        self.blocks: list[tuple[torch.Tensor, ...]] = []
        self.evicted: list[tuple[torch.Tensor, torch.Tensor | None]] = []  # (votes (R, V_b, e), rows (R, e, V_y) | None)

    def add(self, f: torch.Tensor, size: torch.Tensor, readout: torch.Tensor | None, begin: int) -> None:
        """Keys Δ = begin … with weights f (R, V_b, c), |f| in `size` (f itself when f ≥ 0), readout
        rows (c, V_y). The keys set aside are zeroed in f and `size`, in place."""
        V, count = f.shape[1], min(self.count, f.shape[-1])
        if count == 0:
            return  # every key is in the Gaussian part
        score, index = size.amax(dim=1).topk(count, dim=1)  # (R, m): max_b |f_ab(u)|, one pass over the block
        spread = index[:, None, :].expand(-1, V, -1)
        votes = f.gather(2, spread)  # (R, V_b, m)
        f.scatter_(2, spread, 0.0)
        if size is not f:
            size.scatter_(2, spread, 0.0)
        rows = self.readout[:, :0] if readout is None else readout[index]  # (R, m, V_y); none without positions
        self.blocks.append((score, index + begin, votes, rows))
        if len(self.blocks) >= self.MERGE_BLOCKS:
            self.top()

    def top(self) -> DominantKeys:
        """Merge the blocks set aside into the top M; score, offsets, votes and readout are then current,
        and the keys left out are in `evicted`."""
        if self.blocks:
            parts = zip((self.score, self.offsets, self.votes, self.readout), *self.blocks)
            score, offsets, votes, rows = (torch.cat(part, dim=d) for part, d in zip(parts, (1, 1, 2, 1)))
            order = score.argsort(dim=1, descending=True, stable=True)
            keep, out = order[:, : self.count], order[:, self.count :]  # (R, M), (R, e)
            self.score = score.gather(1, keep)
            self.offsets = offsets.gather(1, keep)
            self.votes = votes.gather(2, keep[:, None, :].expand(-1, votes.shape[1], -1))
            positional = rows.shape[1] == score.shape[1]  # zero rows stay zero
            if positional:
                self.readout = rows.gather(1, keep[:, :, None].expand(-1, -1, rows.shape[-1]))
            if out.shape[1]:
                out_votes = votes.gather(2, out[:, None, :].expand(-1, votes.shape[1], -1))
                out_rows = rows.gather(1, out[:, :, None].expand(-1, -1, rows.shape[-1])) if positional else None
                self.evicted.append((out_votes, out_rows))
            self.blocks = []
        return self

    def drain(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The keys pushed out of the top M since the last drain (each once)."""
        evicted, self.evicted = self.evicted, []
        return evicted


def dominant_shares(votes: torch.Tensor, draws: Draws) -> torch.Tensor:
    """Each token's share Σ_m f_ab(u_m)·[x_mk = b] of the dominant keys' weight, per draw: (V_b, V_a, K).

    votes (V_a, V_b, M): f_ab(u_m) of each query token's M dominant keys. One GEMM per token
    against the draws' indicator, not a scatter (several times slower on the CPU).
    """
    return torch.bmm(votes.permute(1, 0, 2), draws.indicator)  # (V_b, V_a, K)


class UnstableReadout(ArithmeticError):
    """The random keys' score covariance has no usable square root (not finite, or no eigendecomposition
    converges): the prediction cannot be made from these weights. The message says why, in plain words."""


ROOT_JITTERS = (1e-9, 1e-6, 1e-3)  # relative to each row's largest variance: the first is the everyday one


def covariance_root(covariance: torch.Tensor) -> torch.Tensor:
    """R with R Rᵀ = covariance[a] + jitter·I for each row a (covariance (V_a, V, V), symmetric PSD in exact
    arithmetic): the eigenvectors scaled by the roots of their eigenvalues (negative rounding clamped to 0).

    The jitter is 1e-9 of the row's largest variance. Where LAPACK's eigendecomposition does not converge
    (an ill-conditioned covariance: a learned-position head trained on past its construction made one), the
    matrix is symmetrised and scaled to unit largest variance, and the jitter grows to 1e-6 and 1e-3: a
    perturbation of the scores' noise far below the draws' own error (1/√K). A covariance that is not
    finite, or that no attempt decomposes, raises UnstableReadout: the prediction says so instead of a
    traceback (lengen_core.measure)."""
    if not bool(torch.isfinite(covariance).all()):
        raise UnstableReadout("the random keys' scores have a variance beyond floating point (weights too large)")
    V = covariance.shape[-1]
    eye = torch.eye(V, dtype=covariance.dtype)
    largest = covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1).clamp_min(1e-300)  # (V_a,)
    try:  # the everyday path, exactly as the shipped numbers were made
        values, vectors = torch.linalg.eigh(covariance + (ROOT_JITTERS[0] * largest)[:, None, None] * eye)
        return vectors * values.clamp_min(0).sqrt()[:, None, :]
    except torch.linalg.LinAlgError:
        pass
    unit = (covariance + covariance.transpose(1, 2)) / (2 * largest[:, None, None])
    for jitter in ROOT_JITTERS:
        try:
            values, vectors = torch.linalg.eigh(unit + jitter * eye)
        except torch.linalg.LinAlgError:
            continue
        return vectors * (values.clamp_min(0) * largest[:, None]).sqrt()[:, None, :]
    raise UnstableReadout("the random keys' score covariance is too ill-conditioned to decompose "
                          f"(no eigendecomposition converged, even with a jitter of {ROOT_JITTERS[-1]:g})")


def readout_noise(
    covariance: torch.Tensor,
    readout: torch.Tensor,
    shares: torch.Tensor,
    draws: Draws,
    dominant: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The random keys' part of the scores, per draw: (V_a, V_y, K).

    A draw of N(0, covariance[a]) (covariance (V_a, V_y, V_y), for the keys taken as Gaussian) plus
    Σ_m f_{a x_mk}(u_m)·(R[x_mk] + RP[u_m]) for the dominant keys: readout R (V_b, V_y), `shares`
    from dominant_shares, and `dominant` = (f (V_a, V_b, M), RP[u_m] (V_a, M, V_y)) for an additive
    encoding's position readout.
    """
    V_a, V, _ = covariance.shape
    root = covariance_root(covariance)  # (V_a, V_y, V_z)
    noise = (root.reshape(V_a * V, V) @ draws.normal.T).view(V_a, V, -1)  # (V_a, V_y, K)
    if torch.equal(readout, torch.eye(V, dtype=readout.dtype)):  # the ideal readout takes the shares as they are
        noise += shares.transpose(0, 1)
    else:
        noise.baddbmm_(readout.T.expand(V_a, -1, -1), shares.transpose(0, 1))  # Σ_b R[b, y]·share_ab
    if dominant is not None:
        votes, positional = dominant
        values = votes.transpose(1, 2).gather(2, draws.tokens[None].expand(V_a, -1, -1))  # (V_a, M, K): f_{a x_mk}(u_m)
        noise.baddbmm_(positional.transpose(1, 2), values)  # (V_a, V_y, K)
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


def _pair_hits(centre: torch.Tensor, noise: torch.Tensor, pairs: torch.Tensor) -> int:
    """argmax_hits over the listed (row, target) pairs only, in float64: rows that each stand for a
    few targets (dilution._query_rows) cost what their pairs cost, not V_c each. The target against
    its best rival (a running maximum over y), ties decided by the argmax itself (the first maximum)."""
    row, target = pairs.nonzero().unbind(1)  # (P,)
    P, V = row.shape[0], centre.shape[-1]
    index = torch.arange(P)
    own_centre = centre[row, target, target][:, None]  # (P, 1)
    rivals = centre[row, target].clone()  # (P, V_y)
    rivals[index, target] = -math.inf
    hits = 0
    for begin in range(0, noise.shape[-1], DRAW_BLOCK):
        block = noise[:, :, begin : begin + DRAW_BLOCK][row]  # (P, V_y, k)
        own = own_centre + block[index, target]  # (P, k)
        best = rivals[:, 0, None] + block[:, 0]
        for y in range(1, V):
            torch.maximum(best, rivals[:, y, None] + block[:, y], out=best)
        hits += int((own > best).sum())
        tie = own == best
        if bool(tie.any()):  # the first maximum wins: the target, unless a rival before it ties
            lower = torch.full_like(best, -math.inf)
            for y in range(V - 1):
                before = (target > y)[:, None]  # (P, 1): y comes before the target
                torch.maximum(lower, torch.where(before, rivals[:, y, None] + block[:, y], -math.inf), out=lower)
            hits += int((tie & (own > lower)).sum())
    return hits


DRAW_BLOCK = 1_024  # draws per pass: the (V, V, block) buffers stay in cache
ROUNDING_SLACK = 8 * torch.finfo(torch.float32).eps  # × the largest |score|: a float32 margin's error is below it


def argmax_hits(centre: torch.Tensor, noise: torch.Tensor, pairs: torch.Tensor | None = None) -> int:
    """How many (a, c, k) have argmax_y (centre[a, c, y] + noise[a, y, k]) = c; noise (V_a, V_y, K);
    `pairs` (V_a, V_c) bool: count only these (None: every pair).

    Equal to counting torch.argmax over the float64 (V_a, V_c, K, V_y) scores, without building
    them: the target against its best rival, and an exact tie-break (the first maximum) from the
    float64 scores where the two are equal. When the rivals' centres depend on c the best rival is
    found in float32 (twice as fast), and the float64 scores also decide wherever the float32 margin
    is within its rounding bound of zero: a bound per query row, from that row's own largest |score|.
    """
    V = centre.shape[-1]
    if pairs is not None and not bool(pairs.all()):
        return _pair_hits(centre, noise, pairs)
    others = ~torch.eye(V, dtype=torch.bool)
    rival_centre = centre[:, (torch.arange(V) + 1) % V, torch.arange(V)]  # (V_a, V_y): token y against c = y+1
    shared = torch.equal(centre[:, others], rival_centre[:, None, :].expand(-1, V, -1)[:, others])  # e.g. ideal readout
    if not shared:  # the float32 rival search's rounding bound (the shared path is float64 throughout)
        centre32 = centre.float()
        row_scale = centre.abs().amax(dim=(1, 2)) + noise.abs().amax(dim=(1, 2))  # (V_a,)
        slack = (ROUNDING_SLACK * row_scale).float()[:, None, None]  # (V_a, 1, 1)
    counted = None if pairs is None else pairs[:, :, None]
    hits = 0
    for begin in range(0, noise.shape[-1], DRAW_BLOCK):
        block = noise[:, :, begin : begin + DRAW_BLOCK]  # (V_a, V_y, k) float64
        if shared:  # cheap enough in float64
            own = centre.diagonal(dim1=1, dim2=2)[:, :, None] + block  # (V_a, V_c, k)
            best = _best_shared_rival(rival_centre, block)
            sure, unsure = own > best, own == best
        else:
            block32 = block.float()
            margin = centre32.diagonal(dim1=1, dim2=2)[:, :, None] + block32 - _best_rival(centre32, block32)
            sure, unsure = margin > slack, margin.abs() <= slack
        if counted is not None:
            sure, unsure = sure & counted, unsure & counted
        hits += int(sure.sum())
        if bool(unsure.any()):  # rare: ties and near-ties, decided by the float64 scores
            a, c, k = unsure.nonzero().unbind(1)
            hits += int(((centre[a, c] + block[a, :, k]).argmax(-1) == c).sum())
    return hits

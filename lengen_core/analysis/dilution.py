"""The attention-dilution law (docs/science.md §8): prediction from the weights (the fitted law: lengen_core.analysis.fit).

Prediction (never fitted to measurements). At length n the last query t = n-1 with token a sees n
keys: the target token c at u* = t − k; its own token a at u = t (Δ = 0: the query is a key of
itself, and its token is no random draw); and n − 2 keys with iid uniform tokens. From the weights
alone we have every logit T_ab(u) (for RoPE T_ab(u) = s_ab(t − u), the per-token carriers). Then

- target mass: p = g(T_ac(u*)) / (g(T_ac(u*)) + g(T_aa(t)) + Z_a), Z_a = Σ_{random u} g(T_{a x_u}(u));
  we take the expectation over tokens to second order in the spread of Z_a;
- accuracy: the readout scores S_y = Σ_u f(T_{a x_u}(u))·(R[x_u, y] + RP[u, y]) (R the token part of
  the readout, RP the position part of an additive encoding; the ideal vote readout is R = I, RP = 0)
  and the answer is right when argmax_y S_y = c. The two fixed keys enter as they are. Of the random
  keys, the DOMINANT_KEYS with the largest weight for query token a have their tokens drawn one by
  one; the rest are many small independent terms, taken as Gaussian with their exact mean and
  covariance over tokens. Why not all Gaussian: a handful of keys that each weigh as much as the
  target make the sum's tail heavy, that tail decides the argmax, and the Gaussian over-predicted
  accuracy by up to 0.07 (docs/prediction.md).

f = g = exp for softmax (the normaliser cancels in the comparison); for linear attention f is the
identity and g = |·|.

Cost (issue 6: 20 lengths up to 2^20 in about a second on two cores). Every length's sums come from
one sweep over Δ in float32 blocks of KEY_CHUNK keys (RoPE: one GEMM per block, the rotation taken
in float64); the square and mass sums are read off the cross sums; the dominant keys are a running
top-M per query token, taken out of the sums at each length; the readout's argmax is counted
against each target's best rival, never through a (V, V, K, V) score tensor (lengen_core.analysis.argmax_count).
Same inputs, same draws, same answer; tests/unit/test_prediction_speed_equivalence.py holds each
piece to its plain form.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lengen_core.analysis.argmax_count import (
    GAUSSIAN_DRAWS,
    DominantKeys,
    Draws,
    argmax_hits,
    dominant_shares,
    readout_noise,
    standard_draws,
)
from lengen_core.analysis.carrier import CarrierBlocks, carrier_values, token_coefficients
from lengen_core.analysis.evaluate import check_lengths, check_sweep
from lengen_core.analysis.rules import InferenceRule, under_rule
from lengen_core.config import RunConfig

LOGIT_HEADROOM = 40.0  # exp(2·40) is finite in float32; a key 40 nats above the target wins anyway
DOMINANT_KEYS = 8  # random keys per query token whose tokens are drawn one by one, not taken as Gaussian
ROW_SPAN = 40.0  # nats: a query row's targets lie within this of its shift (_query_rows), so none underflows


@dataclass
class _KeyStatistics:
    """The keys of one length, per query token a and key tokens b, b'. The random keys (iid tokens)
    split into the M dominant ones (largest max_b |f_ab(u)|, kept one by one) and the rest (sums)."""

    vote_sum: torch.Tensor  # (V, V) Σ_u f(T_ab(u)) over the rest
    vote_square_sum: torch.Tensor  # (V, V) Σ_u f(T_ab(u))²
    vote_cross_sum: torch.Tensor  # (V, V, V) Σ_u f(T_ab(u))·f(T_ab'(u))
    positional_readout: torch.Tensor  # (V, V) Σ_u mean_b f(T_ab(u)) · RP[u]
    positional_cross: torch.Tensor  # (V_a, V_b, V_y) Σ_u f_ab(u)·(f_ab(u) − mean_b' f_ab'(u)) · RP[u]
    positional_outer: torch.Tensor  # (V_a, V_y, V_z) Σ_u var_b f_ab(u) · RP[u] RP[u]ᵀ
    dominant_vote: torch.Tensor  # (V_a, V_b, M) f(T_ab(u_m)) of the dominant keys u_m of query token a
    dominant_offsets: torch.Tensor  # (V_a, M) their Δ = t − u_m (−1: a slot no key has filled yet)
    dominant_positional: torch.Tensor  # (V_a, M, V_y) RP[u_m] (zero without additive positions)
    mass_mean: torch.Tensor  # (V,) Σ_u mean_b g(T_ab(u)) over every random key
    mass_variance: torch.Tensor  # (V,) Σ_u var_b g(T_ab(u))
    rest_mass_mean: torch.Tensor  # (V,) the same two over the random keys but the dominant ones
    rest_mass_variance: torch.Tensor  # (V,)
    dominant_mass: torch.Tensor  # (V_a, V_b, M) g(T_ab(u_m)) of the dominant keys
    target_vote: torch.Tensor  # (V, V) f(T_ac(u*)), query a, target c
    target_mass: torch.Tensor  # (V, V) g(T_ac(u*))
    target_positional: torch.Tensor  # (V,) RP[u*] (zero without additive positions)
    self_vote: torch.Tensor  # (V,) f(T_aa(t)): the key at Δ = 0 is the query's own token
    self_mass: torch.Tensor  # (V,) g(T_aa(t))
    self_positional: torch.Tensor  # (V,) RP[t] (zero without additive positions)
    # Query rows (_query_rows): row r is query token rows[r] with the targets pairs[r] (all of them,
    # one row per token, unless a token's target logits spread over more than ROW_SPAN). Every
    # (V_a, …) field above is per row: (R, …).
    rows: torch.Tensor | None = None  # (R,) the query token of each row
    clamped: int = 0  # most random keys of one row above LOGIT_HEADROOM (their weights clamped to e^40)
    pairs: torch.Tensor | None = None  # (R, V_c) bool: the targets this row stands for
    # softmax only (None for linear attention): the mass sums again, each query token's relative to the
    # largest logit among its random keys so far (no underflow however far below the target they sit),
    # and the two fixed keys' logits, all − shift_a: _predicted_mass works in logs with these.
    scaled_mass: _ScaledMass | None = None
    target_logit: torch.Tensor | None = None  # (V, V) T_ac(u*) − shift_a
    self_logit: torch.Tensor | None = None  # (V,) T_aa(t) − shift_a


@dataclass
class _ScaledMass:
    """Σ_u over the random keys of mean_b e^(T_ab(u) − top_a), of its square and of mean_b e^(2(T_ab(u) − top_a)),
    with top_a the running maximum of T_ab(u) − shift_a (an online softmax: a new maximum rescales the sums)."""

    top: torch.Tensor  # (V,) float64; −inf before any key
    mean: torch.Tensor  # (V,)
    mean_square: torch.Tensor  # (V,)
    square_mean: torch.Tensor  # (V,)

    @classmethod
    def empty(cls, V: int) -> _ScaledMass:
        zeros = torch.zeros(V, dtype=torch.float64)
        return cls(torch.full((V,), -math.inf, dtype=torch.float64), zeros, zeros.clone(), zeros.clone())

    def add(self, logits: torch.Tensor, excluded: Sequence[int]) -> None:
        """Add a block of logits − shift_a (V_a, V_b, c), leaving out the key indices `excluded`.

        The block's exponentials are float32, as its logits are: each is e^(logit − top) ≤ 1, exact to
        float32's relative 1e-7 (the running top is one of the block's float32 logits or an earlier
        one, so the difference is formed exactly); a term below e^−103 underflows to 0 beside a sum
        of at least 1. Each block's sums are then added in float64, where the rescaling happens."""
        if len(excluded) == logits.shape[-1]:
            return
        if excluded:  # the fixed keys: −inf, so their exponentials are 0 (a copy: the caller's block stays)
            logits = logits.clone()
            logits[..., list(excluded)] = -math.inf
        top = torch.maximum(self.top, logits.amax(dim=(1, 2)).double())
        rescale = torch.exp(self.top - top)  # 0 before any key (−inf − finite)
        self.mean.mul_(rescale)
        self.mean_square.mul_(rescale**2)
        self.square_mean.mul_(rescale**2)
        g = torch.exp(logits - top.to(logits.dtype)[:, None, None])  # (V_a, V_b, c), each ≤ 1 with some = 1
        g_mean = g.mean(1)  # (V_a, c)
        self.mean.add_(g_mean.sum(-1, dtype=torch.float64))
        self.mean_square.add_((g_mean * g_mean).sum(-1, dtype=torch.float64))
        self.square_mean.add_(g.square_().mean(1).sum(-1, dtype=torch.float64))
        self.top = top

    def copy(self) -> _ScaledMass:
        return _ScaledMass(*(value.clone() for value in vars(self).values()))


def _softmax_transform(logits: torch.Tensor, below_headroom: bool = False) -> torch.Tensor:
    """exp(logit − shift_a), in place on logits already shifted: the per-query-token shift cancels in
    every ratio and keeps float32 finite (the clamp is skipped where a bound shows it does nothing)."""
    return (logits if below_headroom else logits.clamp_(max=LOGIT_HEADROOM)).exp_()


TRANSFORMS = {  # attention -> (vote transform f, mass transform g) of logits − shift_a; f may work in place
    "softmax": (_softmax_transform, None),  # g = f: the mass sums are the vote sums
    "linear": (lambda logits, below_headroom=False: logits, torch.abs),
}

KEY_CHUNK = 4_096  # keys per block: a (V, V, chunk) float32 block (4 MiB at V = 16) stays in cache between passes


def _last_factor(model: torch.nn.Module, last: int) -> float | None:
    """The logit factor of an inference rule (lengen_core.analysis.rules) for the query at `last`, or None."""
    factor = model.encoding.logit_scale(torch.tensor([last]))
    return None if factor is None else float(factor[0])


def _coefficients(model: torch.nn.Module, last: int) -> torch.Tensor:
    """The per-token carrier coefficients on the CPU, times the rule's logit factor at `last` if any."""
    coefficients, factor = token_coefficients(model).cpu(), _last_factor(model, last)
    return coefficients if factor is None else coefficients * factor


def _logit_table(model: torch.nn.Module, query: torch.Tensor, last: int, positions: torch.Tensor) -> torch.Tensor:
    """Logits of the query at `last` (every token, (V, C)) against every token at `positions`: (V, V, c)."""
    table = torch.einsum("ad,bcd->abc", query, model.key_table(positions)) / math.sqrt(query.shape[-1])
    bias = model.encoding.bias(torch.tensor([last], device=query.device), positions)  # (1, 1, c) or None
    table = table if bias is None else table + bias[0]
    factor = _last_factor(model, last)
    return table if factor is None else table * factor


def _fixed_logits(model: torch.nn.Module, last: int, offsets: Sequence[int]) -> torch.Tensor:
    """Logits (V_a, V_b, n) of the query at `last` against the keys at last − Δ, Δ in `offsets`, float32 on the CPU."""
    if getattr(model.encoding, "rotary", False):
        coefficients, frequencies = _coefficients(model, last), model.encoding.frequencies.cpu()
        return carrier_values(coefficients, frequencies, torch.tensor(offsets)).float()
    query = model.query_table(last)
    positions = last - torch.tensor(offsets, device=query.device)
    return _logit_table(model, query, last, positions).float().cpu()


def _shifted_blocks(model: torch.nn.Module, last: int, shift: torch.Tensor, rows: torch.Tensor):
    """(begin, end) ↦ logits − shift_r (R, V, end − begin) of the query at `last` (token rows[r])
    against the keys at last − Δ, Δ = begin … end−1: float32 on the CPU, blocks at most KEY_CHUNK long.

    RoPE uses its per-token carriers s_ab(Δ) (carrier.CarrierBlocks: float64 angles, one float32 GEMM
    per block) instead of rotating V keys per position; other encodings go through the model's tables.
    """
    if getattr(model.encoding, "rotary", False):
        coefficients, frequencies = _coefficients(model, last)[rows], model.encoding.frequencies.cpu()
        return CarrierBlocks(coefficients, frequencies, KEY_CHUNK, shift)
    query = model.query_table(last)[rows.to(model.embed.device)]
    device = query.device

    def block(begin: int, end: int) -> torch.Tensor:
        positions = (last - torch.arange(begin, end)).to(device)
        return _logit_table(model, query, last, positions).float().cpu() - shift.view(-1, 1, 1)

    return block


def _project(weights: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Σ_n weights[a, x, n]·rows[(a,) n, y]: (V_a, X, Y); rows (n, Y) shared by every a, or (V_a, n, Y)."""
    if rows.dim() == 2:
        return (weights.reshape(-1, weights.shape[-1]) @ rows).view(*weights.shape[:2], rows.shape[-1])
    return torch.bmm(weights, rows)


@dataclass
class _Sums:
    """Float64 sums over a set of keys; None where a block has no such part (no additive positions; g = f)."""

    vote: torch.Tensor  # (V, V) Σ f
    cross: torch.Tensor  # (V, V, V) Σ f_ab·f_ab'; its diagonal is Σ f²
    positional: torch.Tensor | None = None  # (V, V) Σ mean_b f · RP[u]
    positional_cross: torch.Tensor | None = None  # (V, V, V) Σ f·(f − mean_b f) · RP[u]
    positional_outer: torch.Tensor | None = None  # (V, V, V) Σ var_b f · RP[u] RP[u]ᵀ
    mass: torch.Tensor | None = None  # (V,) Σ mean_b g
    mass_square: torch.Tensor | None = None  # (V,) Σ (mean_b g)²

    @classmethod
    def zeros(cls, V: int, rows: int | None = None) -> _Sums:
        R = V if rows is None else rows
        shapes = ((R, V), (R, V, V), (R, V), (R, V, V), (R, V, V), (R,), (R,))
        return cls(*(torch.zeros(shape, dtype=torch.float64) for shape in shapes))

    @classmethod
    def of(cls, f: torch.Tensor, g: torch.Tensor | None, readout: torch.Tensor | None) -> _Sums:
        """The sums over keys with vote weights f (V_a, V_b, n), mass weights g (None: g = f) and
        position readout rows (n, V_y) or (V_a, n, V_y) (None: no additive positions)."""
        R, V = f.shape[:2]
        sums = cls(f.sum(-1).double(), torch.bmm(f, f.transpose(1, 2)).double())  # (V_a, V_b), (V_a, V_b, V_b')
        if readout is not None:
            f_mean = f.mean(1, keepdim=True)  # (V_a, 1, n)
            sums.positional = _project(f_mean, readout)[:, 0].double()
            sums.positional_cross = _project(f * (f - f_mean), readout).double()
            outer = (readout[..., :, None] * readout[..., None, :]).flatten(-2)  # (…, n, V_y·V_z)
            sums.positional_outer = _project(f.var(1, correction=0)[:, None], outer).view(R, V, V).double()
        if g is not None:
            g_mean = g.mean(1).double()  # (V_a, n): mean over key tokens
            sums.mass, sums.mass_square = g_mean.sum(-1), (g_mean * g_mean).sum(-1)
        return sums

    def add(self, other: _Sums, sign: float = 1.0) -> _Sums:
        for name, value in vars(other).items():
            if value is not None:
                getattr(self, name).add_(value, alpha=sign)
        return self

    def copy(self) -> _Sums:
        return _Sums(**{name: value.clone() for name, value in vars(self).items()})


def _statistics(rest: _Sums, dominant: DominantKeys, same_mass: bool, mass, **fixed: torch.Tensor) -> _KeyStatistics:
    """Vote sums over the random keys but the dominant ones (`rest`: the sweep kept them apart, so
    no subtraction); mass sums over every random key, and over the rest. `mass`: g of a vote (None: g = f)."""
    V, rest = rest.vote.shape[1], rest.copy()  # the sweep goes on adding to its own
    dominant = dominant.top()
    votes, rows = dominant.votes.double(), dominant.readout.double()
    weights = votes if mass is None else mass(votes)  # g of the dominant keys
    heavy = _Sums.of(votes, None if same_mass else weights, rows if votes.shape[-1] else None)
    total = rest.copy().add(heavy) if votes.shape[-1] else rest

    def moments(sums: _Sums) -> tuple[torch.Tensor, torch.Tensor]:
        if same_mass:  # g = f: Σ_u (mean_b g)² = Σ_bb' X_abb' / V²
            mean, mean_square = sums.vote.mean(1), sums.cross.sum(dim=(1, 2)) / V**2
            square_mean = sums.cross.diagonal(dim1=1, dim2=2).mean(1)
        else:
            mean, mean_square = sums.mass, sums.mass_square
            square_mean = sums.cross.diagonal(dim1=1, dim2=2).mean(1)  # |f|² = f²
        return mean, square_mean - mean_square

    mass_mean, mass_variance = moments(total)
    rest_mean, rest_variance = moments(rest)
    return _KeyStatistics(
        vote_sum=rest.vote, vote_square_sum=rest.cross.diagonal(dim1=1, dim2=2).clone(), vote_cross_sum=rest.cross,
        positional_readout=rest.positional, positional_cross=rest.positional_cross,
        positional_outer=rest.positional_outer, dominant_vote=votes, dominant_offsets=dominant.offsets.clone(),
        dominant_positional=rows, mass_mean=mass_mean, mass_variance=mass_variance,
        rest_mass_mean=rest_mean, rest_mass_variance=rest_variance.clamp(min=0.0), dominant_mass=weights, **fixed,
    )


def _query_rows(target: torch.Tensor, softmax: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The query rows of a sweep: (rows (R,), shift (R,), pairs (R, V_c) bool) from the target logits
    T_ac (V_a, V_c).

    Every logit of query token a is taken relative to a shift: the scores' argmax and p do not
    change when all of a pair's weights are divided by one number, and float32 stays finite. One
    shift per token, its best target's logit, serves while the token's targets lie within ROW_SPAN
    of each other. A head trained far on (a constructed head with |W_Q| in the hundreds) spreads
    them over 100 nats and more: e^(T_ac − shift) underflowed to 0 for the lower targets, with
    every key near them, and each such pair was scored as a tie of zeros (0.82 predicted at the
    training length where 1.00 was measured). Such a token gets several rows, each its own targets
    within ROW_SPAN of the row's best. Linear attention needs no shift: one row per token, shift 0.
    """
    V = target.shape[0]
    if not softmax:
        return torch.arange(V), torch.zeros(V), torch.ones(V, V, dtype=torch.bool)
    rows, shifts, pairs = [], [], []
    for a in range(V):
        left = torch.ones(V, dtype=torch.bool)
        while bool(left.any()):
            top = target[a][left].max()
            group = left & (target[a] >= top - ROW_SPAN)
            rows.append(a)
            shifts.append(top)
            pairs.append(group)
            left &= ~group
    return torch.tensor(rows), torch.stack(shifts).float(), torch.stack(pairs)


def _fixed_keys(
    model: torch.nn.Module, config: RunConfig, last: int
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The query rows (_query_rows: rows, shift) and the two keys no random token sits at: the
    target at Δ = k (token c) and the query's own position Δ = 0 (token a, always: the query is a
    key of itself). A target outside its row's pairs gets the logit −inf (weight 0; never counted)."""
    vote, mass = TRANSFORMS[config.model.attention]
    mass = vote if mass is None else mass
    V, k = config.task.vocab_size, config.task.offset
    softmax = config.model.attention == "softmax"
    logits = _fixed_logits(model, last, [k, 0])  # (V_a, V_b, 2)
    rows, shift, pairs = _query_rows(logits[..., 0], softmax)
    target, own = logits[rows, :, 0], logits[..., 1].diagonal()[rows]  # (R, V_c), (R,)
    target, own = target - shift[:, None], own - shift
    if softmax:
        target = target.masked_fill(~pairs, -math.inf)
    _, positional = model.readout_tables(torch.tensor([last - k, last], device=model.embed.device))
    positional = torch.zeros(2, V) if positional is None else positional.float().cpu()  # (2, V)
    logits = {"target_logit": target.double(), "self_logit": own.double()} if softmax else {}
    return rows, shift, {
        **logits,
        "target_vote": vote(target.clone()).double(), "target_mass": mass(target.clone()).double(),
        "target_positional": positional[0].double(),
        "self_vote": vote(own.clone()).double(), "self_mass": mass(own.clone()).double(),
        "self_positional": positional[1].double(), "rows": rows, "pairs": pairs,
    }


@torch.no_grad()
def _key_statistics(
    model: torch.nn.Module, config: RunConfig, length: int, snapshots: Sequence[int], in_logs: bool = True
) -> dict[int, _KeyStatistics]:
    """One sweep over the keys of the last query at `length`, by offset Δ = 0 … length-1.

    For an encoding whose logits depend on Δ alone (RoPE, ALiBi, NoPE) the sums at a shorter length
    n are the partial sums after Δ = n-1, so one sweep serves every length in `snapshots`. `in_logs`:
    also the mass sums relative to each row's running top (`_ScaledMass`, softmax only), which only
    `_predicted_mass` without draws reads; `predict` (the draws' mass) leaves them out: an exponential
    of every block less, a fifth of its sweep.
    """
    vote, mass = TRANSFORMS[config.model.attention]
    V, last, k = config.task.vocab_size, length - 1, config.task.offset
    rows, shift, fixed = _fixed_keys(model, config, last)
    R = rows.shape[0]
    additive = bool(getattr(model.encoding, "additive", False))
    rest, dominant = _Sums.zeros(V, R), DominantKeys(V, DOMINANT_KEYS, R)
    blocks = _shifted_blocks(model, last, shift, rows)
    below_headroom = getattr(blocks, "upper_bound", math.inf) <= LOGIT_HEADROOM - 1.0  # 1 nat for float32 rounding
    bounds = sorted({*range(0, length, KEY_CHUNK), *snapshots, length})
    taken: dict[int, _KeyStatistics] = {}
    softmax = config.model.attention == "softmax"
    scaled = _ScaledMass.empty(R) if softmax and in_logs else None
    clamped = torch.zeros(R, dtype=torch.long)
    for begin, end in itertools.pairwise(bounds):
        logits = blocks(begin, end)  # (R, V, c) − shift_r
        fixed_here = [offset - begin for offset in (0, k) if begin <= offset < end]
        if softmax:
            if scaled is not None:
                scaled.add(logits, fixed_here)
            if not below_headroom and float(logits.max()) > LOGIT_HEADROOM:  # one pass; rarely true
                over = logits.amax(1) > LOGIT_HEADROOM  # (R, c)
                over[:, fixed_here] = False
                clamped += over.sum(-1)
        f = vote(logits, below_headroom)  # (R, V, c), in place
        for index in fixed_here:  # neither fixed key is a random one (f(0) = g(0) = 0)
            f[..., index] = 0.0
        readout = None
        if additive:
            _, readout = model.readout_tables((last - torch.arange(begin, end)).to(model.embed.device))
            readout = readout.float().cpu()  # (c, V)
        g = None if mass is None else mass(f)
        dominant.add(f, f if g is None else g, readout, begin)  # sets its keys aside: zero in f and g
        rest.add(_Sums.of(f, g, readout))
        for votes, evicted_rows in dominant.drain():  # keys pushed out of the top M join the rest
            rest.add(_Sums.of(votes, None if mass is None else mass(votes), evicted_rows))
        if end in snapshots:
            dominant.top()
            for votes, evicted_rows in dominant.drain():
                rest.add(_Sums.of(votes, None if mass is None else mass(votes), evicted_rows))
            taken[end] = _statistics(rest, dominant, mass is None, mass, **fixed)
            taken[end].scaled_mass = None if scaled is None else scaled.copy()
            taken[end].clamped = int(clamped.max())
    return taken


def _pair_mean(values: torch.Tensor, stats: _KeyStatistics) -> float:
    """The mean of values (R, V_c) over the (query token, target) pairs the rows stand for."""
    return float(values.mean()) if stats.pairs is None else float(values[stats.pairs].mean())


def _drawn_mass(stats: _KeyStatistics, draws: Draws) -> tuple[float, float]:
    """E[p] with the dominant keys drawn one by one (see _predicted_mass), and the share of it that
    is the rest's second-order term T·S/(T + R_k)³: where that share is not small, the expansion
    itself is in doubt (lengen_core.analysis.trust)."""
    weights = stats.dominant_mass.transpose(1, 2)  # (R, M, V_b)
    drawn = weights.gather(2, draws.tokens[None].expand(weights.shape[0], -1, -1)).sum(1)  # (R, K): D_k
    rest = (stats.self_mass + stats.rest_mass_mean)[:, None] + drawn  # (R, K): R_k
    pairs = torch.ones_like(stats.target_mass, dtype=torch.bool) if stats.pairs is None else stats.pairs
    row, column = pairs.nonzero().unbind(1)
    target = stats.target_mass[row, column][:, None]  # (P, 1)
    total = rest[row].add_(target)  # (P, K); masses are ≥ 0, so a total is 0 or positive
    spread = stats.rest_mass_variance[row, None]
    empty = None if bool((total > 0).all()) else ~(total > 0)  # no key of any weight: p is 0 there
    safe = total.clamp_min_(1e-300)
    first = target / safe
    second = torch.div(target * spread, safe.pow_(3), out=safe)  # in place of the totals, no longer needed
    if empty is not None:
        first.masked_fill_(empty, 0.0)
        second.masked_fill_(empty, 0.0)
    correction = float(second.mean())
    mass = float(first.add_(second).clamp_(0.0, 1.0).mean())
    return mass, (correction / mass if mass > 0 else 0.0)


def _predicted_mass(stats: _KeyStatistics, draws: Draws | None = None) -> float:
    """E[p], p = T/(T + R), R = the own key + Z_a, averaged over the (a, c) pairs.

    With `draws` (what `predict` uses): the dominant keys enter as they do in the accuracy, their
    tokens drawn one by one, and only the rest of Z_a is expanded to second order in its spread:
    p = T/(T + R_k) + T·S/(T + R_k)³, R_k = own + D_k + E[rest], S = Var rest, averaged over the
    draws k. A few keys that each weigh more than the target (present with chance 1/V each) make
    Z_a heavy-tailed: its mean is large although most draws lack them, and the expansion about the
    mean predicted p ≈ 0.23 where 0.53 was measured (a constructed head trained on; docs/prediction.md).

    Without draws, the whole of Z_a to second order: p = T/(T + R) + T·S/(T + R)³, S = Var Z_a. For
    softmax in logs (the same value where nothing underflows): p = σ(log T − log R) and
    T·S/(T + R)³ = p(1 − p)²·S/R², so a run whose logits spread over more than float range still
    gets a number, not 0/0."""
    if draws is not None:
        return _drawn_mass(stats, draws)[0]
    if stats.scaled_mass is not None:
        scaled = stats.scaled_mass
        log_rest = torch.logaddexp(torch.log(scaled.mean) + scaled.top, stats.self_logit)  # (V_a,)
        p = torch.sigmoid(stats.target_logit - log_rest[:, None])  # (V_a, V_c)
        spread = (scaled.square_mean - scaled.mean_square).clamp(min=0.0)
        relative = torch.exp(torch.log(spread) + 2 * scaled.top - 2 * log_rest)  # S/R²; 0 without random keys
        return _pair_mean((p + p * (1 - p) ** 2 * relative[:, None]).clamp(0.0, 1.0), stats)
    target = stats.target_mass  # (V_a, V_c)
    rest = (stats.self_mass + stats.mass_mean)[:, None]  # (V_a, 1): the own key, then the random ones
    spread = stats.mass_variance[:, None]
    total = target + rest
    mass = target / total + target * spread / total**3  # second order in the spread of Z_a
    return _pair_mean(mass.clamp(0.0, 1.0), stats)


def _readout_moments(stats: _KeyStatistics, readout: torch.Tensor, positional: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean (V_a, V_y) and covariance (V_a, V_y, V_z) of the non-dominant random keys' part of the scores.

    Key u adds w_u = f_{a x_u}(u)·(R[x_u] + RP[u]), x_u uniform over V tokens: the covariance is
    Σ_u Cov_b[f_ab(u)(R_b + RP_u)] = Σ_b F2_ab/V · R_b R_bᵀ − Σ_bb' X_abb'/V² · R_b R_b'ᵀ
    + Σ_b (R_b D_abᵀ + D_ab R_bᵀ)/V + Σ_u var_b f_ab(u) · RP_u RP_uᵀ, D_ab = Σ_u f_ab(f_ab − mean_b' f_ab')·RP_u.
    """
    V = readout.shape[0]
    mean = stats.vote_sum / V @ readout  # (V_a, V_y)
    second = torch.einsum("ab,by,bz->ayz", stats.vote_square_sum / V, readout, readout)
    cross = torch.einsum("abe,by,ez->ayz", stats.vote_cross_sum / V**2, readout, readout)
    covariance = second - cross  # (V_a, V_y, V_z)
    if positional:
        mean = mean + stats.positional_readout
        mixed = torch.einsum("by,abz->ayz", readout, stats.positional_cross / V)  # (V_a, V_y, V_z)
        covariance = covariance + mixed + mixed.transpose(1, 2) + stats.positional_outer
    return mean, covariance


def _predicted_accuracy(
    stats: _KeyStatistics, readout: torch.Tensor, positional: bool, draws: Draws, shares: torch.Tensor
) -> float:
    """P(the readout's argmax is the target) over random tokens.

    Scores S_y = Σ_u f(T_{a x_u}(u)) (R[x_u, y] + RP[u, y]) over the random keys: the dominant ones
    with their tokens drawn one by one, the rest taken as Gaussian (_readout_moments); plus the two
    fixed keys, the target f(T_ac(u*))·(R[c] + RP[u*]) and the query's own key f(T_aa(t))·(R[a] + RP[t]).
    `shares`: argmax_count.dominant_shares of these statistics, which every readout shares.
    """
    V = readout.shape[0]
    mean, covariance = _readout_moments(stats, readout, positional)
    dominant = (stats.dominant_vote, stats.dominant_positional) if positional else None
    noise = readout_noise(covariance, readout, shares, draws, dominant)  # (R, V_y, K)
    target = stats.target_vote[:, :, None] * (readout + stats.target_positional * positional)  # (R, V_c, V_y)
    own_rows = readout if stats.rows is None else readout[stats.rows]  # token a's readout row, per row
    own = stats.self_vote[:, None] * (own_rows + stats.self_positional * positional)  # (R, V_y)
    centre = (mean + own)[:, None, :] + target
    pairs = V * V if stats.pairs is None else int(stats.pairs.sum())
    return argmax_hits(centre, noise, stats.pairs) / (pairs * noise.shape[-1])


@dataclass(frozen=True)
class Prediction:
    length: int
    target_mass: float
    accuracy: float  # with the model's own readout
    vote_accuracy: float  # with the ideal readout (the vote model of docs/science.md §8)
    # the share of target_mass that is the second-order term of the expansion (lengen_core.analysis.trust);
    # 0 for a prediction stored before it was reported
    mass_correction: float = 0.0
    clamped_keys: int = 0  # most random keys of one query row whose weight was clamped (LOGIT_HEADROOM)


def predict(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int], draws: int = GAUSSIAN_DRAWS,
            vote: bool = True, rule: InferenceRule | None = None) -> list[Prediction]:
    """Target mass and accuracy at each length, from the trained weights alone. `draws`: the readout's
    random draws per (query token, target) pair (fewer: cheaper and noisier); `vote` False leaves
    the ideal readout's accuracy out (NaN), half the draws' cost (the live probes need neither).

    Under an inference `rule` (lengen_core.analysis.rules) the carrier and the normaliser change with the
    length, so each length gets its own sweep over its keys through the model read under the rule
    (`rules.under_rule`): the logit factor enters the carrier's coefficients (or the logit table),
    the carrier rules the frequencies; nothing is measured."""
    check_lengths(config, model, lengths)
    check_sweep(lengths)
    if rule is not None:
        rule.check(config)
        if all(rule.identity_at(n, config.task.train_length) for n in lengths):
            rule = None  # it changes nothing at these lengths: the model as trained, bit for bit
    token_part, _ = model.readout_tables(torch.zeros(1, dtype=torch.long, device=model.embed.device))
    readout = token_part.detach().cpu().double()  # MPS has no float64: to the CPU first
    additive = bool(getattr(model.encoding, "additive", False))
    ideal = torch.eye(config.task.vocab_size, dtype=torch.float64)
    if rule is not None and not rule.trivial:
        swept = {n: _key_statistics(under_rule(model, rule, n), config, n, [n], in_logs=False)[n] for n in lengths}
    elif getattr(model.encoding, "relative", False):
        swept = _key_statistics(model, config, max(lengths), lengths, in_logs=False)
    else:
        swept = {n: _key_statistics(model, config, n, [n], in_logs=False)[n] for n in lengths}
    shared = standard_draws(config.task.vocab_size, DOMINANT_KEYS, count=draws)
    predictions = []
    for length in lengths:
        stats = swept[length]
        shares = dominant_shares(stats.dominant_vote, shared)  # (V_b, V_a, K)
        mass, correction = _drawn_mass(stats, shared)
        predictions.append(
            Prediction(
                length=length,
                target_mass=mass,
                mass_correction=correction, clamped_keys=stats.clamped,
                accuracy=_predicted_accuracy(stats, readout, additive, shared, shares),
                vote_accuracy=_predicted_accuracy(stats, ideal, False, shared, shares) if vote else math.nan,
            )
        )
    return predictions

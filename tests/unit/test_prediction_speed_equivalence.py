"""The fast prediction (lengen_core.analysis.dilution) against the plain computations it replaces.

`predict` sweeps 2^20 keys in float32 blocks with the RoPE rotation taken in float64, derives the
square and mass sums from the cross sums, keeps each query token's dominant keys as a running top-M
and takes them out of the sums, draws their tokens through one GEMM per token, and counts the
readout's argmax without building the (V_a, V_c, K, V_y) score tensor (issue 6). Each piece is
checked against the straightforward formula here; tests/unit/test_science.py and
tests/unit/test_prediction_panel.py check the prediction against the measurement.
"""

from __future__ import annotations

import math

import pytest
import torch

from lengen_core.analysis.argmax_count import argmax_hits, dominant_shares, standard_draws
from lengen_core.analysis.carrier import token_carriers
from lengen_core.analysis.dilution import DOMINANT_KEYS, LOGIT_HEADROOM, _key_statistics, _predicted_accuracy, predict

FIELDS = ("vote_sum", "vote_square_sum", "vote_cross_sum", "positional_readout", "positional_cross", "positional_outer",
          "dominant_vote", "dominant_positional", "mass_mean", "target_vote", "target_mass", "target_positional",
          "self_vote", "self_mass", "self_positional")


@torch.no_grad()
def _plain_logits(model: torch.nn.Module, config, length: int) -> torch.Tensor:
    """Logits (V_a, V_b, n) of the last query against the key at Δ = 0 … n-1, float64, every offset at once."""
    last, deltas = length - 1, torch.arange(length)
    if getattr(model.encoding, "rotary", False):
        return token_carriers(model, deltas)  # (V, V, n)
    query, keys = model.query_table(last).double(), model.key_table(last - deltas).double()  # (V, C), (V, n, C)
    logits = torch.einsum("ad,bnd->abn", query, keys) / math.sqrt(query.shape[-1])
    bias = model.encoding.bias(torch.tensor([last]), last - deltas)
    return logits if bias is None else logits + bias[0].double()


def _assert_dominant_keys_are_the_largest(f: torch.Tensor, random: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Each query token's dominant offsets hold its largest max_b |f| (up to float32 rounding); the
    mask (V_a, n) of the other random keys."""
    score = f.abs().amax(1) * random  # (V_a, n): the fixed keys count as 0, as in the sweep
    chosen = torch.zeros_like(score, dtype=torch.bool)
    for a, row in enumerate(offsets):
        chosen[a, row[row >= 0]] = True
    for a in range(f.shape[0]):
        if (~chosen[a]).any() and chosen[a].any():
            assert score[a, chosen[a]].min() >= score[a, ~chosen[a]].max() * (1 - 1e-5), a
    return random & ~chosen


@torch.no_grad()
def _plain_statistics(model: torch.nn.Module, config, length: int, offsets: torch.Tensor) -> dict[str, torch.Tensor]:
    """The statistics of one length by their definitions, float64; `offsets` (V_a, M) are the dominant
    keys the sweep chose (checked to be the largest), so the plain sums leave out the same keys."""
    V, last, k = config.task.vocab_size, length - 1, config.task.offset
    deltas = torch.arange(length)
    logits = _plain_logits(model, config, length)
    softmax = config.model.attention == "softmax"
    shift = logits[..., k].max(dim=1).values if softmax else torch.zeros(V, dtype=torch.float64)
    shifted = logits - shift[:, None, None]
    f = shifted.clamp(max=LOGIT_HEADROOM).exp() if softmax else shifted
    g = f if softmax else f.abs()
    random = ((deltas != k) & (deltas != 0))[None, :].expand(V, -1)  # (V_a, n): neither the target nor the query's own key
    rest = _assert_dominant_keys_are_the_largest(f, random, offsets)
    _, table = model.readout_tables(last - deltas)  # (n, V) or None
    positional = torch.zeros(length, V, dtype=torch.float64) if table is None else table.double()
    f_rest, g_all, f_all = f * rest[:, None, :], g[:, :, random[0]], f * random[:, None, :]
    f_mean, f_all_mean = f_rest.mean(1, keepdim=True), f_all.mean(1, keepdim=True)  # (V_a, 1, n)
    safe = offsets.clamp(min=0)  # an unfilled slot (−1) is a key of weight 0
    filled = (offsets >= 0).double()[:, None, :]  # (V_a, 1, M)
    return {
        "vote_sum": f_rest.sum(-1),
        "vote_square_sum": (f_rest**2).sum(-1),
        "vote_cross_sum": torch.einsum("abn,aen->abe", f_rest, f_rest),
        "positional_readout": torch.einsum("an,ny->ay", f_mean[:, 0], positional),
        "positional_cross": torch.einsum("abn,ny->aby", f_rest * (f_rest - f_mean), positional),
        "positional_outer": torch.einsum("an,ny,nz->ayz", f_rest.var(1, correction=0), positional, positional),
        "dominant_vote": torch.stack([f[a][:, safe[a]] for a in range(V)]) * filled * random[0][safe][:, None, :],
        "dominant_positional": positional[safe] * filled.transpose(1, 2),
        "mass_mean": g_all.mean(1).sum(-1),
        "mass_variance": g_all.var(1, correction=0).sum(-1),
        "mass_second_moment": (g_all**2).mean(1).sum(-1),
        # before the dominant keys are taken out: the scale of the float32 error
        "total_vote_sum": f_all.sum(-1),
        "total_cross_sum": torch.einsum("abn,aen->abe", f_all, f_all),
        "total_positional_readout": torch.einsum("an,ny->ay", f_all_mean[:, 0], positional),
        "total_positional_cross": torch.einsum("abn,ny->aby", f_all * (f_all - f_all_mean), positional),
        "total_positional_outer": torch.einsum("an,ny,nz->ayz", f_all.var(1, correction=0), positional, positional),
        "target_vote": f[..., k],
        "target_mass": g[..., k],
        "target_positional": positional[k],
        "self_vote": f[..., 0].diagonal(),
        "self_mass": g[..., 0].diagonal(),
        "self_positional": positional[0],
    }


def _assert_statistics_equal(stats, plain: dict[str, torch.Tensor]) -> None:
    # the vote sums are totals less the dominant keys: float32 error is relative to the totals
    totals = {"vote_sum": plain["total_vote_sum"], "vote_square_sum": plain["total_cross_sum"],
              "vote_cross_sum": plain["total_cross_sum"]}
    totals |= {name: plain[f"total_{name}"] for name in ("positional_readout", "positional_cross", "positional_outer")}
    for name in FIELDS:
        value, expected = getattr(stats, name), plain[name]
        scale = float(totals.get(name, expected).abs().max())
        torch.testing.assert_close(value, expected, rtol=2e-5, atol=1e-6 * scale, msg=name)
    # var = E[g²] − E[g]²: float32 sums make an error relative to E[g²], not to the variance
    torch.testing.assert_close(
        stats.mass_variance, plain["mass_variance"], rtol=0, atol=1e-5 * float(plain["mass_second_moment"].max())
    )


@pytest.mark.parametrize("run_name", ["rope", "rope_linear"])
def test_one_relative_sweep_gives_the_plain_sums_at_every_length(run_name, request):
    run = request.getfixturevalue(run_name)
    lengths = [16, 300, 4_096, 5_000]  # across the sweep's blocks of 4096 keys
    swept = _key_statistics(run.model, run.config, max(lengths), lengths)
    assert sorted(swept) == lengths
    for length in lengths:
        stats = swept[length]
        _assert_statistics_equal(stats, _plain_statistics(run.model, run.config, length, stats.dominant_offsets))


@pytest.mark.parametrize("length", [16, 1_000])
def test_learned_positions_give_the_plain_sums_with_the_position_readout(learned, length):
    stats = _key_statistics(learned.model, learned.config, length, [length])[length]
    plain = _plain_statistics(learned.model, learned.config, length, stats.dominant_offsets)
    for name in ("positional_readout", "positional_cross", "positional_outer", "dominant_positional"):
        assert plain[name].abs().max() > 0, name  # the additive readout terms are exercised
    _assert_statistics_equal(stats, plain)


def _plain_hits(centre: torch.Tensor, noise: torch.Tensor) -> int:
    """The old count: argmax over the full (V_a, V_c, K, V_y) score tensor."""
    V = centre.shape[-1]
    scores = centre[:, :, None, :] + noise.transpose(1, 2)[:, None, :, :]  # (V_a, V_c, K, V_y)
    return int((scores.argmax(-1) == torch.arange(V)[None, :, None]).sum())


def _shared_rival_centre(generator: torch.Generator, V: int, integer: bool) -> torch.Tensor:
    """The ideal readout's structure: the rivals' centres do not depend on the target c."""
    draw = (lambda *s: torch.randint(-3, 4, s, generator=generator).double()) if integer else (
        lambda *s: torch.randn(*s, generator=generator, dtype=torch.float64))
    return draw(V, 1, V) + draw(V, V, 1) * torch.eye(V, dtype=torch.float64)  # (V_a, V_c, V_y)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("integer", [False, True])  # small integers: many exact ties, the argmax tie-break
def test_argmax_hits_equal_counting_the_full_argmax(shared, integer):
    generator = torch.Generator().manual_seed(3)
    V, K = 7, 2_500  # K crosses the count's draw blocks
    if integer:
        noise = torch.randint(-2, 3, (V, V, K), generator=generator).double()
        centre = torch.randint(-2, 3, (V, V, V), generator=generator).double()
    else:
        noise = torch.randn(V, V, K, generator=generator, dtype=torch.float64)
        centre = torch.randn(V, V, V, generator=generator, dtype=torch.float64)
    if shared:
        centre = _shared_rival_centre(generator, V, integer)
    assert argmax_hits(centre, noise) == _plain_hits(centre, noise)


def _plain_accuracy(stats, readout: torch.Tensor, positional: bool) -> float:
    """The estimator by its definition: seeded draws, einsum noise, each dominant key's drawn token
    looked up, the full argmax."""
    V, M = readout.shape[0], stats.dominant_vote.shape[-1]
    mean = stats.vote_sum / V @ readout
    second = torch.einsum("ab,by,bz->ayz", stats.vote_square_sum / V, readout, readout)
    cross = torch.einsum("abe,by,ez->ayz", stats.vote_cross_sum / V**2, readout, readout)
    covariance = second - cross
    if positional:
        mixed = torch.einsum("by,abz->ayz", readout, stats.positional_cross / V)
        covariance = covariance + mixed + mixed.transpose(1, 2) + stats.positional_outer
    jitter = 1e-9 * covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1).clamp_min(1e-300)
    values, vectors = torch.linalg.eigh(covariance + jitter[:, None, None] * torch.eye(V, dtype=torch.float64))
    root = vectors * values.clamp_min(0).sqrt()[:, None, :]
    stream = torch.Generator().manual_seed(0)
    draws = torch.randn(4_096, V, generator=stream, dtype=torch.float64)
    tokens = torch.randint(V, (M, 4_096), generator=stream)  # (M, K): the token of each dominant key
    noise = torch.einsum("kz,ayz->aky", draws, root)  # (V_a, K, V_y)
    weights = stats.dominant_vote[:, tokens, torch.arange(M)[:, None]]  # (V_a, M, K): f_{a x_mk}(u_m)
    noise += torch.einsum("amk,mky->aky", weights, readout[tokens])
    if positional:
        noise += torch.einsum("amk,amy->aky", weights, stats.dominant_positional)
    target = stats.target_vote[:, :, None] * (readout + stats.target_positional * positional)
    own = stats.self_vote[:, None] * (readout + stats.self_positional * positional)  # the query's own key, token a
    centre = mean[:, None, :] + own[:, None, :] + stats.positional_readout[:, None, :] * positional + target
    scores = centre[:, :, None, :] + noise[:, None, :, :]  # (V_a, V_c, K, V_y)
    return float((scores.argmax(-1) == torch.arange(V)[None, :, None]).double().mean())


@pytest.mark.parametrize("run_name", ["rope", "learned"])
def test_predicted_accuracy_equals_the_plain_monte_carlo(run_name, request):
    run = request.getfixturevalue(run_name)
    V = run.config.task.vocab_size
    readout = run.model.readout_tables(torch.zeros(1, dtype=torch.long))[0].detach().double()
    positional = run_name == "learned"
    draws = standard_draws(V, DOMINANT_KEYS)
    for length in (16, 64, 256, 1_024):
        stats = _key_statistics(run.model, run.config, length, [length])[length]
        shares = dominant_shares(stats.dominant_vote, draws)
        for matrix, additive in ((readout, positional), (torch.eye(V, dtype=torch.float64), False)):
            fast = _predicted_accuracy(stats, matrix, additive, draws, shares)
            # the same draws; only a draw within rounding of a tie could count differently
            assert fast == pytest.approx(_plain_accuracy(stats, matrix, additive), abs=1e-5), (length, additive)


def test_the_same_weights_give_the_same_prediction(rope):
    lengths = [16, 100, 5_000]
    assert predict(rope.model, rope.config, lengths) == predict(rope.model, rope.config, lengths)

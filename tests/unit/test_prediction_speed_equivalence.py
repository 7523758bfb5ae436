"""The fast prediction (lengen_core.dilution) against the plain computations it replaces.

`predict` sweeps 2^20 keys in float32 blocks with the RoPE rotation taken in float64, derives the
square and mass sums from the cross sums, and counts the Gaussian readout's argmax without building
the (V_a, V_c, K, V_y) score tensor (issue 6). Each piece is checked against the straightforward
formula here; tests/unit/test_science.py checks the prediction against the measurement.
"""

from __future__ import annotations

import math

import pytest
import torch

from lengen_core.argmax_count import argmax_hits, standard_draws
from lengen_core.carrier import token_carriers
from lengen_core.dilution import LOGIT_HEADROOM, _key_statistics, _predicted_accuracy, predict

FIELDS = ("vote_sum", "vote_square_sum", "vote_cross_sum", "positional_readout", "mass_mean", "target_vote",
          "target_mass", "target_positional")


@torch.no_grad()
def _plain_statistics(model: torch.nn.Module, config, length: int) -> dict[str, torch.Tensor]:
    """The sums of one length by their definitions, float64, every offset at once."""
    V, last, k = config.task.vocab_size, length - 1, config.task.offset
    deltas = torch.arange(length)
    if getattr(model.encoding, "rotary", False):
        logits = token_carriers(model, deltas)  # (V, V, n)
    else:
        query, keys = model.query_table(last).double(), model.key_table(last - deltas).double()  # (V, C), (V, n, C)
        logits = torch.einsum("ad,bnd->abn", query, keys) / math.sqrt(query.shape[-1])
        bias = model.encoding.bias(torch.tensor([last]), last - deltas)
        logits = logits if bias is None else logits + bias[0].double()
    softmax = config.model.attention == "softmax"
    shift = logits[..., k].max(dim=1).values if softmax else torch.zeros(V, dtype=torch.float64)
    shifted = logits - shift[:, None, None]
    f = shifted.clamp(max=LOGIT_HEADROOM).exp() if softmax else shifted
    g = f if softmax else f.abs()
    others = deltas != k
    _, positional = model.readout_tables(last - deltas[others])  # (n-1, V) or None
    f_others, g_others = f[..., others], g[..., others]
    return {
        "vote_sum": f_others.sum(-1),
        "vote_square_sum": (f_others**2).sum(-1),
        "vote_cross_sum": torch.einsum("abn,aen->abe", f_others, f_others),
        "positional_readout": torch.zeros(V, V, dtype=torch.float64)
        if positional is None
        else f_others.mean(1) @ positional.double(),
        "mass_mean": g_others.mean(1).sum(-1),
        "mass_variance": g_others.var(1, correction=0).sum(-1),
        "mass_second_moment": (g_others**2).mean(1).sum(-1),
        "target_vote": f[..., k],
        "target_mass": g[..., k],
        "target_positional": torch.zeros(V, dtype=torch.float64)
        if positional is None
        else model.readout_tables(torch.tensor([last - k]))[1][0].double(),
    }


def _assert_statistics_equal(stats, plain: dict[str, torch.Tensor]) -> None:
    for name in FIELDS:
        value, expected = getattr(stats, name), plain[name]
        scale = float(expected.abs().max())
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
        _assert_statistics_equal(swept[length], _plain_statistics(run.model, run.config, length))


@pytest.mark.parametrize("length", [16, 1_000])
def test_learned_positions_give_the_plain_sums_with_the_position_readout(learned, length):
    stats = _key_statistics(learned.model, learned.config, length, [length])[length]
    plain = _plain_statistics(learned.model, learned.config, length)
    assert plain["positional_readout"].abs().max() > 0  # the additive readout term is exercised
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
    """The old estimator, line for line: seeded draws, einsum noise, the full argmax."""
    V = readout.shape[0]
    mean = stats.vote_sum / V @ readout
    second = torch.einsum("ab,by,bz->ayz", stats.vote_square_sum / V, readout, readout)
    cross = torch.einsum("abe,by,ez->ayz", stats.vote_cross_sum / V**2, readout, readout)
    covariance = second - cross
    jitter = 1e-9 * covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1).clamp_min(1e-300)
    values, vectors = torch.linalg.eigh(covariance + jitter[:, None, None] * torch.eye(V, dtype=torch.float64))
    root = vectors * values.clamp_min(0).sqrt()[:, None, :]
    draws = torch.randn(4_096, V, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    noise = torch.einsum("kz,ayz->aky", draws, root)  # (V_a, K, V_y)
    target = stats.target_vote[:, :, None] * (readout + stats.target_positional * positional)
    centre = mean[:, None, :] + stats.positional_readout[:, None, :] * positional + target
    scores = centre[:, :, None, :] + noise[:, None, :, :]  # (V_a, V_c, K, V_y)
    return float((scores.argmax(-1) == torch.arange(V)[None, :, None]).double().mean())


@pytest.mark.parametrize("run_name", ["rope", "learned"])
def test_predicted_accuracy_equals_the_plain_monte_carlo(run_name, request):
    run = request.getfixturevalue(run_name)
    V = run.config.task.vocab_size
    readout = run.model.readout_tables(torch.zeros(1, dtype=torch.long))[0].detach().double()
    positional = run_name == "learned"
    draws = standard_draws(V)
    for length in (16, 64, 256, 1_024):
        stats = _key_statistics(run.model, run.config, length, [length])[length]
        for matrix, additive in ((readout, positional), (torch.eye(V, dtype=torch.float64), False)):
            fast = _predicted_accuracy(stats, matrix, additive, draws)
            # the same draws; only a draw within rounding of a tie could count differently
            assert fast == pytest.approx(_plain_accuracy(stats, matrix, additive), abs=1e-5), (length, additive)


def test_the_same_weights_give_the_same_prediction(rope):
    lengths = [16, 100, 5_000]
    assert predict(rope.model, rope.config, lengths) == predict(rope.model, rope.config, lengths)

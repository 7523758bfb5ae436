"""The prediction from the weights against the measurement, beyond the default config (docs/prediction.md).

The panel: trained single-head runs that differ from the defaults, picked before the prediction was
looked at on any of them (one replaced because it did not learn: see PANEL). Each is measured at
1× … 64× its training length and must be predicted within PANEL_BOUND everywhere (slow).

Then three hand-built heads, each pinning one gap the prediction once had, against a brute-force
Monte Carlo of the same head (`evaluate` with many samples) on a case where the old modelling is
measurably wrong: the query's own key, the position readout's share of the noise, and the few keys
that dominate a sum the Gaussian cannot describe (fast).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from lengen_core.analysis import dilution
from lengen_core.analysis.argmax_count import dominant_shares, standard_draws
from lengen_core.analysis.dilution import _key_statistics, _predicted_accuracy, _readout_moments, predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.fit import fit_dilution
from lengen_core.analysis.horizon import predicted_horizon
from lengen_core.analysis.trust import PREDICTION_BOUND, prediction_status
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.head import build_model
from tests.helpers.panel import PANEL, SEED_11, with_trained_once

MULTIPLES = (1, 2, 4, 8, 16, 32, 64)
PANEL_BOUND = PREDICTION_BOUND  # |predicted − measured accuracy| at every length of every run
PANEL_SAMPLES = 2_048
def _panel_id(changes: dict) -> str:
    c = {"encoding": "rope", **changes}
    return f"{c['encoding']}-k{c['offset']}-V{c['vocab_size']}-L{c['train_length']}-s{c['seed']}"


@pytest.mark.slow
@pytest.mark.parametrize("changes", with_trained_once([{**c, "target_accuracy": 0.99} for c in PANEL] + [SEED_11]),
                         ids=_panel_id)
def test_the_prediction_holds_across_the_panel(changes, trained):
    run = trained(**changes)
    config = run.config
    lengths = [config.task.train_length * m for m in MULTIPLES]
    measured = evaluate(run.model, config, lengths, samples=PANEL_SAMPLES)
    assert measured[0].accuracy >= 0.98, f"{changes} did not learn: {measured[0].accuracy} at its training length"
    predicted = predict(run.model, config, lengths)
    errors = {m.length: round(p.accuracy - m.accuracy, 4) for p, m in zip(predicted, measured, strict=True)}
    assert max(map(abs, errors.values())) <= PANEL_BOUND, (changes, errors)
    # The fitted law, far keys counted by the weight the prediction gives them: within LAW_TOLERANCE of the
    # measured p wherever p > 2/V (measured ≤ 3% on eleven RoPE runs, where one far key each missed by up to 13%).
    result = fit_dilution(lengths, [m.target_mass for m in measured], [m.target_mass_sem for m in measured],
                          config.task.train_length, config.task.vocab_size, run.verdict,
                          {p.length: p.target_mass for p in predicted})
    if config.model.encoding == "rope":
        assert result.status == "fitted" and result.fit.weighted, (changes, result.reason)
        assert result.fit.holds, (changes, result.reason)
    elif result.status == "fitted":
        assert result.fit.holds, (changes, result.reason)


# --- heads trained on from the construction (issue 27) -----------------------------------------
# `construct … --keep-training`: the hand-built learned-position head (lengen_core.models.construct), trained
# on past 100% so its weights grow (|W_Q| 520 to 630 after 200 to 400 steps). Its target logits
# spread over 100+ nats across target tokens and dozens of far keys sit hundreds of nats above them:
# before issue 27 the prediction read 0.26 to 0.82 at the training length, where 1.00 was measured.

CONSTRUCTED = (
    dict(vocab_size=16, offset=3, train_length=32, seed=4, steps=400),  # the issue's own run
    dict(vocab_size=12, offset=5, train_length=24, seed=2, steps=400, max_positions=2_048),
    dict(vocab_size=8, offset=2, train_length=16, seed=1, steps=200, max_positions=1_024),
)
QUICK_CONSTRUCTED = dict(vocab_size=8, offset=2, train_length=16, seed=1, steps=100, max_positions=256)


def _constructed_id(changes: dict) -> str:
    return f"constructed-k{changes['offset']}-V{changes['vocab_size']}-L{changes['train_length']}-s{changes['seed']}"


def _check_constructed(run, multiples) -> None:
    """Within PREDICTION_BOUND of the measurement at every length, or flagged untrusted; right at 1×
    either way; and a predicted horizon (or a reason for none)."""
    config = run.config
    L = config.task.train_length
    lengths = [L * m for m in multiples]
    measured = evaluate(run.model, config, lengths, samples=PANEL_SAMPLES)
    assert measured[0].accuracy >= 0.98, (config, measured[0].accuracy)
    predicted = predict(run.model, config, lengths)
    errors = {m.length: (round(p.accuracy - m.accuracy, 4), round(p.target_mass - m.target_mass, 4))
              for p, m in zip(predicted, measured, strict=True)}
    assert abs(errors[L][0]) <= PREDICTION_BOUND and abs(errors[L][1]) <= PREDICTION_BOUND, errors
    status = prediction_status({p.length: p for p in predicted}, measured, L, run.verdict)
    worst = max(max(map(abs, e)) for e in errors.values())
    assert worst <= PREDICTION_BOUND or not status.trusted, (errors, status)
    horizon = predicted_horizon(run.model, config, ceiling=min(config.model.max_positions, 64 * L))
    assert horizon.length is not None and horizon.length >= L, horizon


def test_a_head_trained_on_from_the_construction_is_predicted_or_flagged(trained):
    _check_constructed(trained(encoding="learned", init="constructed", keep_training=True, **QUICK_CONSTRUCTED),
                       (1, 2, 4, 16))


@pytest.mark.slow
@pytest.mark.parametrize("changes", CONSTRUCTED, ids=_constructed_id)
def test_heads_trained_on_from_the_construction_are_predicted_or_flagged(changes, trained):
    _check_constructed(trained(encoding="learned", init="constructed", keep_training=True, **changes), MULTIPLES)


# --- hand-built heads ------------------------------------------------------------------------


def _head(config: RunConfig, **weights: torch.Tensor) -> torch.nn.Module:
    """A minimal head with the given weights (embed, W_Q, W_K, W_V, W_U, and a learned `table`)."""
    model = build_model(config, torch.Generator().manual_seed(0)).eval()
    with torch.no_grad():
        for name, value in weights.items():
            target = model.encoding.table if name == "table" else getattr(model, name)
            target.copy_(value)
    return model


def _own_key_head() -> tuple[RunConfig, torch.nn.Module]:
    """No positions; a query attends e^1 more to keys of its own token; the readout is the vote."""
    V = 8
    config = with_changes(RunConfig(), encoding="nope", vocab_size=V, d_model=V, offset=1, train_length=4)
    eye = torch.eye(V)
    return config, _head(config, embed=eye, W_Q=eye * math.sqrt(V), W_K=eye, W_V=eye, W_U=eye)


def _old_own_key_accuracy(length: int, samples: int = 100_000) -> float:
    """The own-key head's accuracy were the key at Δ = 0 a random token (the old modelling), by Monte Carlo."""
    stream = torch.Generator().manual_seed(1)
    keys = torch.randint(8, (samples, length), generator=stream)  # (S, n): Δ = 0 drawn like the others
    query = torch.randint(8, (samples,), generator=stream)
    weights = torch.exp((keys == query[:, None]).double())
    votes = torch.zeros(samples, 8, dtype=torch.float64).scatter_add_(1, keys, weights)  # (S, V)
    return float((votes.argmax(1) == keys[:, length - 2]).double().mean())  # the target sits at Δ = 1


def test_the_query_s_own_key_holds_its_own_token():
    config, model = _own_key_head()
    lengths = [4, 6, 8, 16]
    measured = evaluate(model, config, lengths, samples=4_096)
    for p, m in zip(predict(model, config, lengths), measured, strict=True):
        assert abs(p.accuracy - m.accuracy) <= 0.03, (p, m)
        assert abs(p.target_mass - m.target_mass) <= 0.01, (p, m)
    for m in measured[:2]:  # the old modelling is far off where the own key is one of few
        assert _old_own_key_accuracy(m.length) - m.accuracy >= 0.1, m


def _positional_head(length: int) -> tuple[RunConfig, torch.nn.Module]:
    """Learned positions: the query finds the target by position (7 nats), prefers keys of its own
    token (3 nats), and each other key adds a large ±paired position vector to the readout, so the
    readout's mean over positions cancels and only its spread is left."""
    V, k, C = 8, 2, 18  # token dims 0–7, position readout 8–15, query and target markers 16, 17
    config = with_changes(
        RunConfig(), encoding="learned", vocab_size=V, d_model=C, offset=k, train_length=8, max_positions=length
    )
    pairs = torch.randn(length // 2, V, generator=torch.Generator().manual_seed(0))
    table = torch.zeros(length, C)
    table[:, V : 2 * V] = 5.0 * torch.stack((pairs, -pairs), dim=1).flatten(0, 1)  # (n, V)
    table[[length - 1, length - 1 - k], V : 2 * V] = 0.0  # the fixed keys read out their tokens only
    table[length - 1, 2 * V], table[length - 1 - k, 2 * V + 1] = 1.0, 1.0
    W_Q, W_K, W_U = torch.zeros(C, C), torch.zeros(C, C), torch.zeros(C, V)
    W_Q[range(V), range(V)], W_Q[2 * V, 2 * V + 1] = 3.0 * math.sqrt(C), 7.0 * math.sqrt(C)
    W_K[range(V), range(V)], W_K[2 * V + 1, 2 * V + 1] = 1.0, 1.0
    W_U[range(V), range(V)], W_U[range(V, 2 * V), range(V)] = 1.0, 1.0
    embed = torch.zeros(V, C)
    embed[:, :V] = torch.eye(V)
    return config, _head(config, embed=embed, table=table, W_Q=W_Q, W_K=W_K, W_V=torch.eye(C), W_U=W_U)


def _without_positional_covariance(stats):
    return dataclasses.replace(
        stats,
        positional_cross=torch.zeros_like(stats.positional_cross),
        positional_outer=torch.zeros_like(stats.positional_outer),
    )


def test_the_position_readout_spreads_the_scores():
    length = 256
    config, model = _positional_head(length)
    measured = evaluate(model, config, [length], samples=4_096)[0]
    assert abs(predict(model, config, [length])[0].accuracy - measured.accuracy) <= 0.03, measured
    stats = _key_statistics(model, config, length, [length])[length]
    readout = model.readout_tables(torch.zeros(1, dtype=torch.long))[0].detach().double()
    draws = standard_draws(config.task.vocab_size, dilution.DOMINANT_KEYS)
    shares = dominant_shares(stats.dominant_vote, draws)
    old = _predicted_accuracy(_without_positional_covariance(stats), readout, True, draws, shares)
    assert old - measured.accuracy >= 0.15, (old, measured)


@torch.no_grad()
def test_the_readout_covariance_is_that_of_the_scores():
    """_readout_moments against the scores of random tokens at the keys it describes (neither fixed nor dominant)."""
    length, samples = 256, 20_000
    config, model = _positional_head(length)
    V, last, k = config.task.vocab_size, length - 1, config.task.offset
    stats = _key_statistics(model, config, length, [length])[length]
    readout, positional = model.readout_tables(torch.arange(length))
    readout, positional = readout.double(), positional.double()
    keys = model.key_table(torch.arange(length))  # (V, n, C)
    logits = torch.einsum("ad,bnd->abn", model.query_table(last), keys).double() / math.sqrt(config.model.d_model)
    shift = logits[:, :, last - k].amax(1)  # (V_a,): as predict shifts
    weights = torch.exp(logits - shift[:, None, None])  # (V_a, V_b, n)
    mean, covariance = _readout_moments(stats, readout, True)
    _, token_only = _readout_moments(_without_positional_covariance(stats), readout, True)
    stream = torch.Generator().manual_seed(2)
    for a in (0, 5):
        dominant = last - stats.dominant_offsets[a]
        random = torch.tensor([u for u in range(length) if u not in {last, last - k, *dominant.tolist()}])
        tokens = torch.randint(V, (samples, len(random)), generator=stream)  # (S, n)
        w = weights[a][tokens, random]  # (S, n)
        votes = torch.zeros(samples, V, dtype=torch.float64).scatter_add_(1, tokens, w)
        scores = votes @ readout + w @ positional[random]  # (S, V_y)
        scale = float(covariance[a].abs().max())
        torch.testing.assert_close(scores.mean(0), mean[a], rtol=0, atol=0.03 * float(mean[a].abs().max()))
        torch.testing.assert_close(torch.cov(scores.T), covariance[a], rtol=0, atol=0.05 * scale)
        assert float((token_only[a] - covariance[a]).abs().max()) >= 0.5 * scale  # the positional terms matter here


def _dominated_head(rivals: list[int], length: int = 256) -> tuple[RunConfig, torch.nn.Module]:
    """Learned positions: the target at 8 nats, a few rival keys 0.5 nats below it, the rest at 0;
    no token preference; the readout is the vote."""
    V, k, C = 8, 2, 10
    config = with_changes(
        RunConfig(), encoding="learned", vocab_size=V, d_model=C, offset=k, train_length=8, max_positions=length
    )
    table = torch.zeros(length, C)
    table[length - 1, V], table[length - 1 - k, V + 1], table[rivals, V + 1] = 1.0, 8.0, 7.5
    embed, W_Q, W_K, W_U = torch.zeros(V, C), torch.zeros(C, C), torch.zeros(C, C), torch.zeros(C, V)
    embed[:, :V] = torch.eye(V)
    W_Q[V, V + 1], W_K[V + 1, V + 1] = math.sqrt(C), 1.0
    W_U[range(V), range(V)] = 1.0
    return config, _head(config, embed=embed, table=table, W_Q=W_Q, W_K=W_K, W_V=torch.eye(C), W_U=W_U)


def test_a_few_heavy_keys_are_drawn_one_by_one(monkeypatch):
    length, rivals = 256, [10, 50, 90, 130, 170, 200, 220, 240]
    config, model = _dominated_head(rivals, length)
    measured = evaluate(model, config, [length], samples=4_096)[0]
    assert abs(predict(model, config, [length])[0].accuracy - measured.accuracy) <= 0.03, measured
    monkeypatch.setattr(dilution, "DOMINANT_KEYS", 0)  # every random key in the Gaussian: the old modelling
    gaussian = predict(model, config, [length])[0]
    assert gaussian.accuracy - measured.accuracy >= 0.08, (gaussian, measured)

"""Smoke test of the horizon study (studies/horizon.py, issue 14): its training loop is lengen's, its
model options do what they say, its fast evaluation agrees with a forward pass, and one tiny run
reports a horizon that is real."""

from __future__ import annotations

import torch

from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training
from studies.horizon import (
    TARGET_PANEL,
    HorizonHead,
    Variant,
    horizon_of,
    measure,
    run_target,
    run_variant,
    target_runs,
    train_variant,
)
from tests.helpers.panel import PANEL, SEED_11

# d_model 64: at 32 the tiny run is below 2/V by 64 (three lengths with p > 2/V), and a law needs four
TINY = with_changes(RunConfig(), vocab_size=8, offset=2, train_length=8, d_model=64, steps=400, patience=20)


def test_default_variant_trains_exactly_as_lengen():
    config = with_changes(RunConfig(), steps=15, keep_training=True)
    lengen = Training(config, "cpu")
    for _ in lengen:
        pass
    ours = train_variant(config, Variant("default", "baseline"))
    assert ours.steps == 15
    for mine, theirs in zip(ours.model.parameters(), lengen.model.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_logit_scale_and_qk_init_scale_the_attention_logits():
    config = RunConfig()
    tokens = torch.randint(16, (2, 10), generator=torch.Generator().manual_seed(0))
    plain = HorizonHead(config, torch.Generator().manual_seed(3)).attend(tokens)[0].logits
    scaled = HorizonHead(config, torch.Generator().manual_seed(3), logit_scale=2.0).attend(tokens)[0].logits
    small = HorizonHead(config, torch.Generator().manual_seed(3), qk_init=0.5).attend(tokens)[0].logits
    finite = plain.isfinite()  # the causal mask is -inf in all three
    torch.testing.assert_close(scaled[finite], 2.0 * plain[finite])
    torch.testing.assert_close(small[finite], 0.25 * plain[finite])


def test_fast_measurement_matches_a_forward_pass_with_the_residual():
    config, length, samples = RunConfig(), 24, 64
    model = HorizonHead(config, torch.Generator().manual_seed(1), logit_scale=1.5, residual=True).eval()
    accuracy = measure(model, config, [length], samples)[0]["accuracy"]
    tokens = sequence_tokens(12_345, length, samples, config.task.vocab_size)  # (S, L): evaluate's sequences
    with torch.no_grad():
        answers = model(tokens, query_start=length - 1)[:, 0].argmax(-1)  # (S,)
    assert accuracy == float((answers == tokens[:, length - 1 - config.task.offset]).float().mean())
    assert model.residual and (model(tokens, length - 1) != HorizonHead(config, torch.Generator().manual_seed(1),
                                                                           logit_scale=1.5)(tokens, length - 1)).any()


def test_horizon_is_the_last_length_before_the_first_failure():
    assert horizon_of([8, 16, 32, 64], [1.0, 0.95, 0.5, 0.95]) == 16
    assert horizon_of([8, 16], [0.8, 1.0]) is None
    assert horizon_of([8, 16], [0.9, 0.9]) == 16


def test_a_tiny_run_learns_and_reports_both_horizons():
    record = run_variant(Variant("default", "baseline"), TINY, seed=0, samples=128)
    assert record["train_accuracy"] > 0.95 and record["fit_status"] == "fitted" and record["m_out"] > 0
    horizon, accuracy = record["horizon"], record["accuracy"]
    assert horizon is not None and accuracy[str(horizon)] >= 0.9 and accuracy[str(2 * horizon)] < 0.9
    # the prediction from the weights puts the fall inside the same doubling as the measurement
    assert horizon <= record["predicted_horizon"] < 2 * horizon


def test_the_targets_are_the_prediction_panels_rope_configs_at_their_seeds():
    rope = [c for c in PANEL if c["encoding"] == "rope"] + [SEED_11]
    assert [(c["offset"], c["vocab_size"], c["train_length"], c["seed"]) for c in rope] == list(TARGET_PANEL)
    runs = target_runs("all")
    assert [(label, seed, multiple) for label, _, seed, multiple, _ in runs[:3]] == [("default", s, 16) for s in (0, 1, 2)]
    assert all(multiple == 4 and needed == 0.9 for _, _, _, multiple, needed in runs[3:]) and len(runs) == 3 + 8


def test_a_tiny_target_run_reports_its_accuracy_at_the_multiples():
    record = run_target(Variant("default", "baseline", qk_init=0.3), "tiny", TINY, 0, 4, 0.9, samples=128)
    assert record["accuracy"]["1x"] > 0.95 and record["steps"] <= 400
    assert record["meets"] == (record["accuracy"].get("4x", 0.0) >= 0.9)

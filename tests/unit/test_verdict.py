"""The verdict on every run: learned in range, at chance beyond; stored, reloaded, and read first.

The trained runs are the session's (tests/unit/conftest.py): the default config with each encoding.
Measured at this commit (2,048 fresh answers): RoPE 1.00 in range and 1.00 at 2×; learned
positions 1.00 and 0.061 (chance 0.0625); RoPE with linear attention 0.81 and 0.28; single-head
NoPE and ALiBi about 0.16 in range.
"""

from __future__ import annotations

import json

import pytest
import torch

from lengen.store import METRICS_FILE, RunStore
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.verdict import VERDICT_ANSWERS, judge
from lengen_core.thresholds import ACCURACY_BAR

CHANCE = 1 / 16


def test_rope_learned_and_extrapolates(rope):
    verdict = rope.verdict
    assert verdict.learned and verdict.in_range_accuracy >= 0.99
    assert verdict.beyond_length == 32 and verdict.at_chance_beyond is False
    assert verdict.beyond_accuracy >= 0.95 and verdict.answers == VERDICT_ANSWERS
    assert "learned the task" in verdict.reason and "above chance" in verdict.reason


def test_learned_positions_learned_and_sit_at_chance_beyond(learned):
    verdict = learned.verdict
    assert verdict.learned and verdict.in_range_accuracy >= 0.99
    assert verdict.at_chance_beyond is True
    assert verdict.beyond_low <= CHANCE <= verdict.beyond_high  # the interval holds chance itself


def test_linear_attention_did_not_learn_the_task_but_is_above_chance(rope_linear):
    verdict = rope_linear.verdict
    assert not verdict.learned
    assert 2 * CHANCE < verdict.in_range_accuracy < ACCURACY_BAR
    assert verdict.in_range_high < ACCURACY_BAR  # not a borderline call: the whole interval is below
    assert verdict.at_chance_beyond is False


@pytest.mark.parametrize("encoding", ["nope", "alibi"])
def test_a_single_nope_or_alibi_head_never_learns_and_says_why(trained, encoding):
    run = trained(encoding=encoding)
    verdict = run.verdict
    assert not verdict.learned
    assert verdict.in_range_accuracy < 0.4, verdict  # measured about 0.16: an expressivity failure
    assert run.model.encoding.single_head_limit  # the reason a page shows
    assert "did not learn the task" in verdict.reason
    assert run.model.encoding.single_head_limit in verdict.reason


def test_the_verdict_counts_the_evaluation_it_names(rope_linear):
    """in_range_accuracy is exactly the accuracy evaluate measures on the verdict's fresh sequences."""
    from lengen_core.analysis.verdict import VERDICT_SEED

    (report,) = evaluate(rope_linear.model, rope_linear.config, [16], samples=VERDICT_ANSWERS, seed=VERDICT_SEED)
    assert rope_linear.verdict.in_range_accuracy == report.accuracy
    assert (rope_linear.verdict.in_range_low, rope_linear.verdict.in_range_high) == (report.accuracy_low,
                                                                                     report.accuracy_high)


def test_the_verdict_is_stored_with_the_run_and_read_back(tmp_path, rope_linear):
    store = RunStore(tmp_path)
    store.save(rope_linear)
    metrics = json.loads((store.run_dir(rope_linear.run_id) / METRICS_FILE).read_text())
    assert metrics["verdict"]["learned"] is False
    (summary,) = store.list_runs()
    assert summary.verdict == rope_linear.verdict
    assert store.load(rope_linear.run_id).verdict == rope_linear.verdict


def test_a_run_stored_before_verdicts_is_judged_when_loaded(tmp_path, learned):
    store = RunStore(tmp_path)
    store.save(learned)
    path = store.run_dir(learned.run_id) / METRICS_FILE
    metrics = json.loads(path.read_text())
    del metrics["verdict"]
    path.write_text(json.dumps(metrics))
    assert store.list_runs()[0].verdict is None
    assert store.load(learned.run_id).verdict == learned.verdict


def test_a_shift_transformer_is_judged_on_the_positions_past_its_training_length():
    from lengen_core.config import RunConfig, with_changes
    from lengen_core.training import train

    config = with_changes(RunConfig(), task="shift", n_layers=1, n_heads=2, d_model=32, steps=400, encoding="learned")
    run = train(config, "cpu")
    verdict = judge(run.model, run.config)
    assert verdict == run.verdict
    assert verdict.beyond_length == 32
    # positions ≥ 16 of a learned table: never trained, so at chance, whatever the model did in range
    assert verdict.beyond_accuracy < 0.15, verdict
    assert torch.is_tensor(next(run.model.parameters()))

"""C10 tested as a claim: RoPE, ALiBi and NoPE differ on unseen delays the way lengen_core.claims says
(DELAY_EXPECTATIONS), on seeds other than those it was measured on (0-2; these are 3 and 4) and at the
claim's own thresholds, not tuned to one trajectory.

Measured (seeds 0-2, L 32, V 16, d_model 64, delays 2-8, 1,000 steps; docs/science.md, the delay tasks):
delay-copy: RoPE 1.00 on its delays, 0.13-0.15 on the unseen ones; ALiBi 0.17-0.20 and NoPE 0.17-0.18 on its
own delays (not learned); selective-copy: all three 0.99-1.00 on the unseen delays. Each margin below is
therefore wide: 0.9 against 1.0 and 0.8 against ≤ 0.2. Slow: twelve trainings of 1-5 s each; the quick
representative is test_delays.py's RoPE head on delay-copy.
"""

from __future__ import annotations

import pytest
import torch

from lengen_core.analysis.delays import delay_curve
from lengen_core.claims import DELAY_EXPECTATIONS, DELAY_HOLDS, delay_expectation, delay_outcome
from lengen_core.config import RunConfig, with_changes
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import train

SEEDS = (3, 4)
ENCODINGS = ("rope", "alibi", "nope")
CLAIM_BASE = with_changes(RunConfig(), task="delay-copy", delays="2-8", train_length=32, vocab_size=16, d_model=64,
                          steps=1_000)


@pytest.fixture(scope="module")
def curves():
    torch.set_num_threads(1)
    cache = {}

    def get(task: str, encoding: str, seed: int):
        if (task, encoding, seed) not in cache:
            config = with_changes(CLAIM_BASE, task=task, encoding=encoding, seed=seed)
            run = train(config, "cpu")
            cache[task, encoding, seed] = run, delay_curve(run.model, config, samples=128)
        return cache[task, encoding, seed]

    return get


def test_the_claim_covers_every_encoding_on_both_tasks() -> None:
    for task in ("delay-copy", "selective-copy"):
        for encoding in ("rope", "alibi", "nope", "learned", "sinusoidal"):
            assert (task, encoding) in DELAY_EXPECTATIONS


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("task", ("delay-copy", "selective-copy"))
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_each_encoding_does_at_unseen_delays_what_the_claim_says(curves, task, encoding, seed) -> None:
    run, curve = curves(task, encoding, seed)
    outcome = delay_outcome(run.verdict.learned, curve.mean_accuracy(False), curve.chance)
    assert outcome == delay_expectation(task, encoding), (curve.mean_accuracy(True), curve.mean_accuracy(False))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_on_delay_copy_rope_learns_only_its_delays_and_alibi_and_nope_none(curves, seed) -> None:
    """The three differ the way the measurements say: RoPE exact on its delays and near chance far from them
    (its kernel peaks at the trained delays), ALiBi's one-head slope and NoPE blind to order everywhere."""
    rope = curves("delay-copy", "rope", seed)[1]
    assert rope.mean_accuracy(True) >= ACCURACY_BAR
    far = [p.accuracy for p in rope.unseen() if p.delay >= 12]
    assert sum(far) / len(far) < 1 - DELAY_HOLDS  # ≤ 0.2: the unseen distances fail
    for encoding in ("alibi", "nope"):
        blind = curves("delay-copy", encoding, seed)[1]
        assert blind.mean_accuracy(True) < 0.5  # measured ≤ 0.20
        assert rope.mean_accuracy(True) - blind.mean_accuracy(True) > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_on_selective_copy_all_three_hold_at_unseen_delays(curves, seed) -> None:
    """The marker makes the source findable by content: every encoding holds past its trained delays."""
    for encoding in ENCODINGS:
        curve = curves("selective-copy", encoding, seed)[1]
        assert curve.mean_accuracy(False) >= DELAY_HOLDS
        assert min(p.source_mass for p in curve.unseen()) > 0.5

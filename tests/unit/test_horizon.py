"""The horizon: the largest length at which accuracy stays ≥ 0.9, predicted (bisection on the prediction
from the weights) and measured (on the lengths an evaluation measured)."""

from __future__ import annotations

import pytest

from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.horizon import (
    horizon_ceiling,
    measured_horizon,
    predicted_horizon,
    search_horizon,
)
from lengen_core.config import MAX_EVAL_LENGTH, MAX_SWEEP_LENGTHS
from lengen_core.thresholds import ACCURACY_BAR


class Falling:
    """Accuracy 1 up to `last`, then 0.5; counts the calls and the lengths asked."""

    def __init__(self, last: int) -> None:
        self.last, self.calls, self.asked = last, 0, []

    def __call__(self, lengths: list[int]) -> list[float]:
        assert len(lengths) <= MAX_SWEEP_LENGTHS and lengths == sorted(lengths)
        self.calls += 1
        self.asked += lengths
        return [1.0 if n <= self.last else 0.5 for n in lengths]


@pytest.mark.parametrize("last", [16, 17, 31, 12_345, 524_287, MAX_EVAL_LENGTH - 1])
def test_the_bisection_finds_the_exact_last_length(last):
    accuracy = Falling(last)
    horizon = search_horizon(accuracy, 16, MAX_EVAL_LENGTH)
    assert (horizon.length, horizon.below) == (last, last + 1)
    assert accuracy.calls <= 10  # the doublings (three calls at most), then ≤ 7 rounds of 7 lengths for 2^19
    assert max(accuracy.asked) <= MAX_EVAL_LENGTH


def test_a_run_that_holds_everywhere_or_nowhere():
    holds = search_horizon(Falling(10**9), 24, 1_000)
    assert (holds.length, holds.below, holds.ceiling) == (1_000, None, 1_000) and holds.text.startswith("≥ 1,000")
    never = search_horizon(Falling(3), 24, 1_000)
    assert (never.length, never.below) == (None, 24) and never.text.startswith("none")


def test_the_measured_horizon_is_the_last_length_before_the_first_fall():
    lengths = [8, 16, 32, 64, 128, 256]
    found = measured_horizon(lengths, [0.5, 1.0, 0.97, 0.91, 0.7, 0.95], 16)  # 8 is inside training: ignored
    assert (found.length, found.below, found.ceiling) == (64, 128, 256)
    assert measured_horizon(lengths, [1.0] * 6, 16).below is None
    assert measured_horizon(lengths, [1.0, 0.8, 1.0, 1.0, 1.0, 1.0], 16).length is None
    assert measured_horizon([4, 8], [1.0, 1.0], 16) is None


def test_the_predicted_horizon_of_a_trained_rope_run(rope):
    """On the default run: the predicted accuracy is ≥ 0.9 at the horizon and below it one token
    further, and the measured accuracy (2,048 samples) agrees on which side of 0.9 each is, 25% away."""
    horizon = predicted_horizon(rope.model, rope.config)
    assert horizon.ceiling == MAX_EVAL_LENGTH and horizon.below == horizon.length + 1
    at, past = predict(rope.model, rope.config, [horizon.length, horizon.below])
    assert at.accuracy >= ACCURACY_BAR > past.accuracy
    assert 64 * 16 <= horizon.length <= 1024 * 16  # the recipe: measured 1.00 at 64×, 0.945 at 8,192, 0.566 at 16,384
    near, far = evaluate(rope.model, rope.config, [int(horizon.length * 0.75), int(horizon.length * 1.25)],
                         samples=2_048)
    assert near.accuracy >= ACCURACY_BAR - 0.03 and far.accuracy < ACCURACY_BAR


def test_a_learned_table_is_asked_only_up_to_its_end(learned):
    assert horizon_ceiling(learned.model) == learned.config.model.max_positions
    horizon = predicted_horizon(learned.model, learned.config)
    assert horizon.ceiling == learned.config.model.max_positions
    assert horizon.length is not None and horizon.length < 2 * learned.config.task.train_length  # pinned


@pytest.mark.slow  # a minute on a busy machine; the default run's search within its budgets stays fast
def test_a_search_over_its_budget_stops_with_the_bracket_it_has(rope):
    """`afford` is asked before every call after the first: refusing one ends the search there, unresolved."""
    asked = []

    def afford(lengths):
        asked.append(list(lengths))
        return len(asked) < 3  # the rest of the doublings, one round, then no more

    stopped = predicted_horizon(rope.model, rope.config, afford=afford)
    full = predicted_horizon(rope.model, rope.config)
    assert not stopped.resolved and full.resolved and len(asked) == 3
    assert stopped.length <= full.length < stopped.below  # the bracket holds the exact answer
    assert "the search stopped at this server's budget" in stopped.text and str(f"{stopped.below:,}") in stopped.text
    never = predicted_horizon(rope.model, rope.config, afford=lambda lengths: False)
    assert never.length == 64 * 16 and never.below is None and not never.resolved  # held to 64×, not looked further


@pytest.mark.slow  # half a minute; the predicted horizon of the trained RoPE run stays fast
def test_the_default_runs_search_fits_the_default_budgets_step_by_step(rope):
    from lengen.budget import Budgets, check, horizon_cost, prediction_fits

    defaults = Budgets(3_072 << 20, 120.0, 1_800.0)
    check(horizon_cost(rope.config, MAX_EVAL_LENGTH), defaults)  # the first call, checked before it starts
    priced = predicted_horizon(rope.model, rope.config, afford=prediction_fits(rope.config, defaults))
    assert priced.resolved and priced == predicted_horizon(rope.model, rope.config)

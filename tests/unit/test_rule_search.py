"""The predicted horizon's search under an inference rule asks its lengths one by one up to the first below the
bar (lengen_core.analysis.horizon.first_below_in_order): the same horizon as asking every length of a call,
for fewer predictions (issue 40: each length under a rule costs a sweep of its own)."""

from __future__ import annotations

import math

import pytest

from lengen.store import preset_store
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.horizon import RULE_RESOLUTION, first_below_in_order, predicted_horizon, search_horizon
from lengen_core.analysis.rules import parse_rule
from lengen_core.thresholds import ACCURACY_BAR

ROPE = "rope-softmax-retrieval-s0-bc1b0b2bb01a"  # the default config, trained (a shipped preset)


def _curves():
    """Accuracy against length: falling at several places, recovering after a dip, never holding, always holding."""
    yield "falls at 1,600", lambda n: 0.95 if n <= 1600 else 0.5
    yield "falls at 100", lambda n: 0.99 - n / 10_000
    yield "dips at 40 and recovers", lambda n: 0.5 if 40 <= n <= 60 else 0.95
    yield "never holds", lambda n: 0.3
    yield "always holds", lambda n: 0.97
    yield "NaN past 5,000", lambda n: math.nan if n > 5000 else 0.93


@pytest.mark.parametrize("name, curve", list(_curves()), ids=[name for name, _ in _curves()])
def test_asking_in_order_finds_the_same_horizon_for_fewer_lengths(name, curve):
    asked = {"eager": 0, "in order": 0}

    def counted(how):
        def accuracy_at(lengths):
            asked[how] += len(lengths)
            return [curve(n) for n in lengths]
        return accuracy_at

    eager = search_horizon(counted("eager"), 16, 16_384, relative=RULE_RESOLUTION)
    lazy = search_horizon(first_below_in_order(counted("in order"), ACCURACY_BAR), 16, 16_384, relative=RULE_RESOLUTION)
    assert lazy == eager, name
    assert asked["in order"] <= asked["eager"]
    if eager.below is not None and eager.length is not None:  # a bisection ran: lengths past each crossing saved
        assert asked["in order"] < asked["eager"]


@pytest.mark.parametrize("label", ["dynamic", "ntk-by-parts"])
def test_the_ruled_search_on_the_rope_preset_is_the_eager_one(label):
    run = preset_store().load(ROPE)
    rule = parse_rule(label)

    def every_length(lengths):  # the search as it was: each call's lengths all predicted, with the ideal readout
        return [p.accuracy for p in predict(run.model, run.config, lengths, rule=rule)]

    eager = search_horizon(every_length, run.config.task.train_length, 2048, relative=RULE_RESOLUTION)
    assert predicted_horizon(run.model, run.config, ceiling=2048, rule=rule) == eager
    assert eager.below is not None  # the rule's horizon falls inside 2,048: the bisection was exercised


def test_accuracies_known_under_the_rule_are_not_predicted_again(monkeypatch):
    from lengen_core.analysis import horizon

    run = preset_store().load(ROPE)
    rule = parse_rule("log-n")  # holds to 2,048: the search asks only the doublings, all known
    doublings = [16, 32, 64, 128, 256, 512, 1024, 2048]
    known = {p.length: p.accuracy for p in predict(run.model, run.config, [4, *doublings], rule=rule)}  # as measure does
    asked = []

    def counted(model, config, lengths, **options):
        asked.extend(lengths)
        return predict(model, config, lengths, **options)

    fresh = predicted_horizon(run.model, run.config, ceiling=2048, rule=rule)
    monkeypatch.setattr(horizon, "predict", counted)
    assert predicted_horizon(run.model, run.config, ceiling=2048, rule=rule, known=known) == fresh
    assert asked == []
    dynamic = parse_rule("dynamic")  # falls at 1,024: the bisection past it is predicted, the doublings are not
    known = {p.length: p.accuracy for p in predict(run.model, run.config, doublings, rule=dynamic)}
    fresh = predicted_horizon(run.model, run.config, ceiling=2048, rule=dynamic)
    asked.clear()
    assert predicted_horizon(run.model, run.config, ceiling=2048, rule=dynamic, known=known) == fresh
    assert asked and not set(asked) & set(doublings)


def test_measure_hands_its_own_predictions_to_the_search_under_a_rule(monkeypatch):
    """`measure` passes the accuracies it predicted at its lengths to the horizon's search (`known`): under a rule
    the search predicts none of them again, and finds the horizon it finds alone."""
    from lengen_core.analysis import horizon
    from lengen_core.measure import measure

    run = preset_store().load(ROPE)
    rule = parse_rule("log-n")
    lengths = [16, 32, 64, 128, 256, 512, 1024, 2048]
    alone = predicted_horizon(run.model, run.config, ceiling=2048, rule=rule)
    asked = []

    def counted(model, config, lengths, **options):
        asked.extend(lengths)
        return predict(model, config, lengths, **options)

    monkeypatch.setattr(horizon, "predict", counted)
    measured = measure(run, lengths, 64, rule, search=True)
    assert measured.predicted_horizon == alone
    assert not set(asked) & set(lengths), asked  # its own predictions were read, not made again

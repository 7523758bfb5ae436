"""The predicted target mass in logs (lengen_core.analysis.dilution._predicted_mass): the same number as the
plain ratio wherever nothing underflows, and a number, not 0/0, for a run whose logits spread over
more than float range (a learned table trained far past 100%: NaN at its own training length before; since
issue 27 its query rows keep even the plain ratio finite)."""

from __future__ import annotations

import math

import pytest

from lengen_core.analysis import dilution
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train


def plain_mass(stats) -> float:
    """The ratio before it moved to logs: T/(T + R) + T·S/(T + R)³ on the exponentiated sums."""
    target, rest = stats.target_mass, (stats.self_mass + stats.mass_mean)[:, None]
    total = target + rest
    mass = (target / total + target * stats.mass_variance[:, None] / total**3).clamp(0.0, 1.0)
    return float(mass.mean() if stats.pairs is None else mass[stats.pairs].mean())  # the pairs each row stands for


@pytest.mark.parametrize("changes", [dict(), dict(encoding="learned"), dict(encoding="alibi", offset=5),
                                     dict(vocab_size=8, train_length=24, offset=7)], ids=str)
def test_in_logs_the_mass_is_the_plain_ratio_where_nothing_underflows(changes):
    config = with_changes(RunConfig(), steps=120, **changes)
    model = train(config, "cpu").model.eval()
    L = config.task.train_length
    for length in (L, 4 * L, 16 * L):
        stats = dilution._key_statistics(model, config, length, [length])[length]
        assert stats.scaled_mass is not None
        plain, in_logs = plain_mass(stats), dilution._predicted_mass(stats)
        assert math.isfinite(plain) and in_logs == pytest.approx(plain, rel=1e-6, abs=1e-12), (length, plain, in_logs)


def test_linear_attention_keeps_the_plain_ratio():
    config = with_changes(RunConfig(), attention="linear", steps=60)
    model = train(config, "cpu").model.eval()
    stats = dilution._key_statistics(model, config, 16, [16])[16]
    assert stats.scaled_mass is None and dilution._predicted_mass(stats) == plain_mass(stats)


@pytest.mark.slow
def test_a_table_trained_past_float_range_gets_its_measured_mass_not_nan():
    config = with_changes(RunConfig(), encoding="learned", init="constructed", steps=300, keep_training=True,
                          max_positions=1024)
    model = train(config, "cpu").model.eval()
    L = config.task.train_length
    stats = dilution._key_statistics(model, config, L, [L])[L]
    # Before issue 27 one shift per query token left 0/0 here (the random keys and some targets
    # underflowed together); each query row now keeps its targets within ROW_SPAN of its shift.
    assert len(stats.rows) > config.task.vocab_size  # its targets spread wider than one row
    assert math.isfinite(plain_mass(stats))
    assert dilution._predicted_mass(stats) == pytest.approx(plain_mass(stats), rel=1e-6, abs=1e-12)
    predicted = predict(model, config, [L])[0].target_mass
    measured = evaluate(model, config, [L], samples=512)[0].target_mass
    assert predicted == pytest.approx(measured, abs=0.02), (predicted, measured)

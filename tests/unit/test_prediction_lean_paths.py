"""The prediction's lean paths give the answers of the paths they replaced, bit for bit.

- `predict` sweeps without the mass sums in logs (`_key_statistics(..., in_logs=False)`), which only
  `_predicted_mass` without draws reads: every other statistic is the same tensor, and the clamped keys are
  still counted;
- `_drawn_mass` forms its (pairs, draws) terms in place, skipping the masks where no total is 0: the same
  floats as the plain formula, which is kept here.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from lengen_core.analysis.argmax_count import standard_draws
from lengen_core.analysis.dilution import DOMINANT_KEYS, _drawn_mass, _key_statistics, predict
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.initial import initial_model


def _plain_drawn_mass(stats, draws) -> tuple[float, float]:
    """`_drawn_mass` as it was written before (tensors out of place, both masks always)."""
    weights = stats.dominant_mass.transpose(1, 2)
    drawn = weights.gather(2, draws.tokens[None].expand(weights.shape[0], -1, -1)).sum(1)
    rest = (stats.self_mass + stats.rest_mass_mean)[:, None] + drawn
    pairs = torch.ones_like(stats.target_mass, dtype=torch.bool) if stats.pairs is None else stats.pairs
    row, column = pairs.nonzero().unbind(1)
    target = stats.target_mass[row, column][:, None]
    total = target + rest[row]
    spread = stats.rest_mass_variance[row, None]
    safe = total.clamp_min(1e-300)
    first = torch.where(total > 0, target / safe, 0.0)
    second = torch.where(total > 0, target * spread / safe**3, 0.0)
    mass = float((first + second).clamp(0.0, 1.0).mean())
    return mass, (float(second.mean()) / mass if mass > 0 else 0.0)


CONFIGS = {  # untrained heads of their own sizes: each path of the sweep (rotary, additive table, bias, linear)
    "rope": dict(vocab_size=12, d_model=40, encoding="rope", qk_init=2.0),
    "learned": dict(vocab_size=9, d_model=24, encoding="learned", train_length=24, max_positions=8_192),
    "alibi": dict(vocab_size=7, d_model=16, encoding="alibi", offset=2),
    "linear": dict(vocab_size=10, d_model=32, encoding="rope", attention="linear"),
    "hot": dict(vocab_size=6, d_model=16, encoding="nope", qk_init=10.0),  # W_Q × 40 below: logits over the headroom
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_sweep_without_logs_and_the_lean_drawn_mass_change_nothing(name):
    config = with_changes(RunConfig(), **CONFIGS[name])
    model = initial_model(config).eval().requires_grad_(False)
    if name == "hot":
        model.W_Q.mul_(40.0)
    lengths = [config.task.train_length, 700, 5_000]  # across the sweep's blocks of 4,096 keys
    draws = standard_draws(config.task.vocab_size, DOMINANT_KEYS)
    relative = getattr(model.encoding, "relative", False)
    for length in lengths:
        snapshots = lengths if relative else [length]
        full = _key_statistics(model, config, max(snapshots), snapshots)[length]
        lean = _key_statistics(model, config, max(snapshots), snapshots, in_logs=False)[length]
        assert lean.scaled_mass is None and (full.scaled_mass is None) == (config.model.attention != "softmax")
        for field in dataclasses.fields(full):
            if field.name != "scaled_mass":
                value, expected = getattr(lean, field.name), getattr(full, field.name)
                same = torch.equal(value, expected) if isinstance(value, torch.Tensor) else value == expected
                assert same, (name, length, field.name)
        assert _drawn_mass(lean, draws) == _plain_drawn_mass(full, draws), (name, length)
    if name == "hot":
        assert lean.clamped > 0  # the count the sweep keeps without the sums in logs
    assert all(math.isfinite(p.target_mass) for p in predict(model, config, lengths))


def test_a_pair_with_no_weight_anywhere_has_mass_zero_as_before():
    """Totals of exactly 0 (no target weight, no key weight): the masks the lean path applies only then."""
    config = with_changes(RunConfig(), vocab_size=5, d_model=16, attention="linear")
    model = initial_model(config).eval().requires_grad_(False)
    stats = _key_statistics(model, config, 64, [64], in_logs=False)[64]
    draws = standard_draws(5, DOMINANT_KEYS)
    emptied = dataclasses.replace(stats, target_mass=stats.target_mass.clone(), self_mass=stats.self_mass.clone(),
                                  rest_mass_mean=stats.rest_mass_mean.clone(), dominant_mass=stats.dominant_mass.clone())
    emptied.target_mass[1, :3] = 0.0
    emptied.self_mass[1], emptied.rest_mass_mean[1] = 0.0, 0.0
    emptied.dominant_mass[1] = 0.0
    lean, plain = _drawn_mass(emptied, draws), _plain_drawn_mass(emptied, draws)
    assert lean == plain and math.isfinite(lean[0]) and math.isfinite(lean[1])

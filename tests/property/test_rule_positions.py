"""Inference rules on random lengths (lengen_core.analysis.rules): Position Interpolation maps every test
position into the trained range, NTK at scale 1 is the encoding as trained bit for bit, and the
logit rules leave every query that sees no more keys than in training as it was."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lengen_core.analysis.rules import RuledEncoding, RuleError, make_rule
from lengen_core.config import MAX_EVAL_LENGTH, MAX_TRAIN_LENGTH, RunConfig, with_changes
from lengen_core.models.encodings import build_encoding
from tests.helpers.example_counts import fewer_examples

train_lengths = st.integers(2, MAX_TRAIN_LENGTH)


@given(train_lengths, st.integers(1, MAX_EVAL_LENGTH))
@example(16, MAX_EVAL_LENGTH).via("the longest evaluation")
@example(2, 3).via("one position past the shortest training length")
def test_pi_maps_every_test_position_into_the_trained_range(train_length: int, length: int) -> None:
    positions = torch.arange(length)
    mapped = make_rule("pi").map_positions(positions, length, train_length)
    assert float(mapped.min()) == 0.0
    assert float(mapped.max()) < train_length
    assert bool((mapped[1:] > mapped[:-1]).all())  # order kept: a later key stays later
    if length <= train_length:  # within the training length nothing moves
        assert torch.equal(mapped, positions.to(torch.float64))


@fewer_examples(4, deadline=None)  # each example builds an encoding and rotates a few hundred vectors
@given(st.sampled_from([8, 16, 32, 64, 128]), st.sampled_from([1, 2, 4]), st.floats(2.0, 1e6), st.integers(1, 1 << 20),
       st.integers(0, 2**31 - 1))
def test_ntk_at_scale_1_rotates_exactly_as_rope(d_model: int, n_heads: int, base: float, length: int, seed: int) -> None:
    config = with_changes(RunConfig(), d_model=d_model, n_heads=n_heads, rope_base=base, n_layers=1 if n_heads > 1 else 0)
    rope = build_encoding(config.model, torch.Generator().manual_seed(0))
    if d_model // n_heads <= 2:  # D/(D−2) has no value: refused, one line
        with pytest.raises(RuleError, match="head width above 2"):
            RuledEncoding(rope, make_rule("ntk", 1.0), length, config)
        return
    ruled = RuledEncoding(rope, make_rule("ntk", 1.0), length, config)
    generator = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, length, (64,), generator=generator)
    x = torch.randn(2, n_heads, 64, d_model // n_heads, generator=generator)
    assert torch.equal(ruled.rotate(x, positions), rope.rotate(x, positions))
    assert ruled.logit_scale(positions) is None


@given(train_lengths, st.integers(1, MAX_EVAL_LENGTH))
def test_log_n_leaves_queries_within_the_training_keys_alone(train_length: int, length: int) -> None:
    keys = torch.arange(1, min(length, 4 * train_length) + 1, dtype=torch.float64)
    factor = make_rule("log-n").logit_factor(keys, length, train_length)
    inside = keys <= train_length
    assert bool((factor[inside] == 1.0).all())
    assert bool((factor[~inside] > 1.0).all())
    assert bool((factor[1:] >= factor[:-1]).all())  # more keys, sharper

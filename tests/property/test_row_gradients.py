"""C1's optimisation half, as a property: in training, the rows of a learned position table past the
training length get exactly zero gradient, at every step, for any small config (lengen_core.optimisation)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lengen_core.config import RunConfig, with_changes
from lengen_core.optimisation import trace_training
from tests.helpers.example_counts import fewer_examples


@st.composite
def learned_configs(draw: st.DrawFn) -> RunConfig:
    train_length = draw(st.integers(3, 12))
    return with_changes(
        RunConfig(), encoding="learned",
        vocab_size=draw(st.integers(2, 8)), offset=draw(st.integers(1, train_length - 1)),
        train_length=train_length, length_mode=draw(st.sampled_from(["fixed", "sampled"])),
        d_model=draw(st.sampled_from([4, 8, 16])), max_positions=draw(st.integers(train_length, 4 * train_length)),
        steps=draw(st.integers(1, 4)), batch_size=draw(st.integers(1, 8)),
        learning_rate=draw(st.sampled_from([1e-3, 3e-2, 0.5])), seed=draw(st.integers(0, 2**31 - 1)),
    )


@fewer_examples(10, deadline=None)  # each example builds a model and trains it a few steps (tens of ms)
@given(learned_configs())
def test_rows_past_the_training_length_get_exactly_zero_gradient(config: RunConfig) -> None:
    trace = trace_training(config, every=1)
    L = config.task.train_length
    assert trace.gradient_steps == tuple(range(1, config.train.steps + 1))  # every step recorded
    assert (trace.row_gradient_norms[:, L:] == 0.0).all()
    assert trace.largest_gradient_beyond() == 0.0
    assert trace.largest_gradient_within() > 0.0  # the hook does see the gradient of the rows trained

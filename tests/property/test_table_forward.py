"""The minimal head's two forwards for its one retrieval query agree: the per-token tables
(`MinimalHead._last_query`, what training steps run) and the blocked attention over (B, T, C) tensors
(`_run`, what `attend` and every other query read), in logits and in every parameter's gradient, for
every encoding, both attentions and random sizes, weights and tokens."""

from __future__ import annotations

from typing import get_args

import torch
from hypothesis import given
from hypothesis import strategies as st

from lengen_core.config import AttentionName, EncodingName, RunConfig, with_changes
from lengen_core.models.head import MinimalHead, build_model
from tests.helpers.example_counts import fewer_examples

RELATIVE = 2e-5  # float32 sums in another order: ~1e-7 of the largest value, times the few terms of a row


@st.composite
def heads_and_tokens(draw: st.DrawFn) -> tuple[MinimalHead, torch.Tensor]:
    vocab = draw(st.integers(2, 12))
    length = draw(st.integers(2, 40))
    config = with_changes(
        RunConfig(), encoding=draw(st.sampled_from(get_args(EncodingName))),
        attention=draw(st.sampled_from(get_args(AttentionName))), vocab_size=vocab,
        offset=draw(st.integers(1, length - 1)), train_length=length,
        d_model=2 * draw(st.integers(vocab // 2 + 1, 24)), max_positions=draw(st.integers(length, 3 * length)),
    )
    model = build_model(config, torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1))))
    with torch.no_grad():  # trained weights are larger than the initial ones: sharpen the attention too
        scale = draw(st.sampled_from([1.0, 4.0]))
        model.W_Q.mul_(scale)
        model.W_K.mul_(scale)
    batch = draw(st.integers(vocab, 3 * vocab))
    tokens = torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(draw(st.integers(0, 99))))
    return model, tokens


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool((a - b).abs().max() <= RELATIVE * max(b.abs().max().item(), 1e-12))


@fewer_examples(4, deadline=None)  # each example builds a model and differentiates two forwards (ms)
@given(heads_and_tokens())
def test_the_table_forward_is_the_blocked_forward(case: tuple[MinimalHead, torch.Tensor]) -> None:
    model, tokens = case
    T = tokens.shape[1]
    assert model._tables_pay(tokens, T - 1, None)  # the case under test is the one training takes
    tables, blocked = model._last_query(tokens), model._run(tokens, T - 1, None)
    assert tables.shape == blocked.shape == (tokens.shape[0], 1, model.embed.shape[0])
    assert _close(tables, blocked)
    weights = torch.randn(blocked.shape, generator=torch.Generator().manual_seed(0))
    parameters = [p for p in model.parameters()]
    by_tables = torch.autograd.grad((tables * weights).sum(), parameters, allow_unused=True)
    by_blocks = torch.autograd.grad((blocked * weights).sum(), parameters, allow_unused=True)
    for name, a, b in zip([n for n, _ in model.named_parameters()], by_tables, by_blocks):
        assert (a is None) == (b is None), name
        if a is not None:
            assert _close(a, b), name


def test_the_tables_are_taken_only_where_they_are_smaller() -> None:
    """A forward the tables would make larger (V > B, or V > C) or that is observed, or has several
    queries, takes the blocked path."""
    model = build_model(with_changes(RunConfig(), vocab_size=8, d_model=8), torch.Generator().manual_seed(0))
    tokens = torch.randint(8, (16, 10))
    assert model._tables_pay(tokens, 9, None)
    assert not model._tables_pay(tokens[:4], 9, None)  # batch 4 < vocab 8
    assert not model._tables_pay(tokens, 5, None)  # several queries
    assert not model._tables_pay(tokens, 9, lambda *args: None)  # somebody observes the blocks
    wide = build_model(with_changes(RunConfig(), vocab_size=16, d_model=8), torch.Generator().manual_seed(0))
    assert not wide._tables_pay(torch.randint(16, (32, 10)), 9, None)  # vocab 16 > d_model 8

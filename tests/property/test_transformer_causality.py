"""Causality of the transformer (docs/science.md §3, C8): for every encoding and both attentions, any
depth and number of heads, the output at position t ignores the tokens after t, in every layer.

The single-head model has the same property test in test_encodings.py.
"""

from __future__ import annotations

from typing import get_args

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lengen_core.config import AttentionName, EncodingName, RunConfig, with_changes
from lengen_core.models.head import build_model
from lengen_core.models.transformer import Transformer
from tests.helpers.causal_inputs import tokens_with_changed_future
from tests.helpers.example_counts import fewer_examples

ENCODINGS = get_args(EncodingName)
ATTENTIONS = get_args(AttentionName)


# One example builds a transformer of up to 3 layers and runs it twice: tens of milliseconds, which a
# loaded 2-core machine stretches past the default deadline.
@fewer_examples(4, deadline=None)
@given(
    encoding=st.sampled_from(ENCODINGS),
    attention=st.sampled_from(ATTENTIONS),
    n_layers=st.integers(1, 3),
    n_heads=st.sampled_from([1, 2, 4]),
    length=st.integers(2, 48),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
@example(encoding="learned", attention="softmax", n_layers=2, n_heads=2, length=48, seed=0, data=None)
@example(encoding="alibi", attention="linear", n_layers=3, n_heads=4, length=2, seed=1, data=None)
def test_every_encoding_and_attention_gives_a_causal_transformer(
    encoding, attention, n_layers, n_heads, length, seed, data
):
    config = with_changes(
        RunConfig(), task="shift", encoding=encoding, attention=attention, n_layers=n_layers, n_heads=n_heads,
        d_model=16, max_positions=48,
    )
    model = build_model(config, torch.Generator().manual_seed(seed)).eval()
    assert isinstance(model, Transformer) and model.n_layers == n_layers
    V = config.task.vocab_size
    t = 0 if data is None else data.draw(st.integers(0, length - 2), label="query")
    tokens, changed = tokens_with_changed_future(V, length, t, seed + 1)
    with torch.no_grad():
        out, out_changed = model(tokens), model(changed)  # (B, T, V)
        patterns, patterns_changed = model.attend(tokens), model.attend(changed)
    torch.testing.assert_close(out_changed[:, : t + 1], out[:, : t + 1], rtol=0, atol=0)
    above_diagonal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    for before, after in zip(patterns, patterns_changed, strict=True):
        assert (before.weights[:, :, above_diagonal] == 0).all()
        # every layer's queries up to t, against keys up to t, are untouched by later tokens
        past = (slice(None), slice(None), slice(0, t + 1), slice(0, t + 1))  # queries and keys ≤ t
        torch.testing.assert_close(after.logits[past], before.logits[past], rtol=0, atol=0)
    assert not torch.equal(out_changed[:, t + 1 :], out[:, t + 1 :])  # later queries do see the change

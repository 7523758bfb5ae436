"""The per-head analysis runs its sequences in batches sized by d_model (sequence.tokens_per_batch):
a wide model's batch keeps its activations within the evaluation's memory target, and the reports
are those of one pass over every sequence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengen_core.analysis import heads
from lengen_core.analysis.evaluate import EVAL_MEMORY_BYTES, FLOAT
from lengen_core.analysis.heads import analyse_heads
from lengen_core.analysis.sequence import FORWARD_FLOATS_PER_TOKEN, TOKENS_PER_BATCH, tokens_per_batch
from lengen_core.config import MAX_D_MODEL, RunConfig, with_changes
from lengen_core.models.initial import initial_model

WIDE = with_changes(RunConfig(), d_model=MAX_D_MODEL, n_layers=1, n_heads=2, train_length=16, offset=3)


def batches_of(model: torch.nn.Module, run) -> list[int]:
    """The number of tokens in each forward pass `run()` makes through `model`."""
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0].numel()))
    try:
        run()
    finally:
        handle.remove()
    return seen


def test_a_wide_models_batches_keep_their_activations_within_the_target():
    per_token = FLOAT * FORWARD_FLOATS_PER_TOKEN * MAX_D_MODEL
    assert tokens_per_batch(WIDE) * per_token <= EVAL_MEMORY_BYTES < TOKENS_PER_BATCH * per_token  # the old size was over
    assert tokens_per_batch(with_changes(WIDE, d_model=32)) == TOKENS_PER_BATCH  # a narrow model keeps the full batch
    model = initial_model(WIDE).eval()
    sizes = batches_of(model, lambda: analyse_heads(model, WIDE, samples=900))
    assert max(sizes) * per_token <= EVAL_MEMORY_BYTES
    assert sum(sizes) == 900 * 16 + 225 * 64  # every sequence once: 900 at L_train, a quarter at 4 × L_train
    assert len(sizes) > 2  # more than one batch at each length


@pytest.mark.slow  # 19 s; the batches' memory bound above is the quick representative
def test_the_reports_do_not_depend_on_the_batches(monkeypatch):
    model = initial_model(WIDE).eval()
    batched = analyse_heads(model, WIDE, samples=900)
    monkeypatch.setattr(heads, "tokens_per_batch", lambda config: 1 << 30)  # one pass over every sequence
    assert batches_of(model, lambda: analyse_heads(model, WIDE, samples=900)) == [900 * 16, 225 * 64]
    whole = analyse_heads(model, WIDE, samples=900)
    for b, w in zip(batched, whole, strict=True):
        np.testing.assert_allclose(b.carrier, w.carrier, rtol=1e-6, atol=1e-7)
        assert b.target_weight == pytest.approx(w.target_weight, rel=1e-6)
        assert (b.argmax_offset, b.pinned_key, b.effective_rank) == (w.argmax_offset, w.pinned_key, w.effective_rank)
        assert b.pinned_share == pytest.approx(w.pinned_share, abs=1e-12)

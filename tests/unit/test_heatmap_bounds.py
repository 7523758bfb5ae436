"""Heatmaps cost what they show: one layer's one head, pooled as it is computed, the layers above
it never run; the same numbers as slicing every layer's full attention; memory bounded for the
largest transformer the config allows at the longest heatmap length."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.analysis.heatmap import MAX_HEATMAP_LENGTH, attention_heatmap, head_map
from lengen_core.config import MAX_D_MODEL, MAX_HEADS, MAX_LAYERS, RunConfig, with_changes
from lengen_core.models.encodings import LengthError
from lengen_core.models.initial import initial_model

ROOT = Path(__file__).resolve().parents[2]
SMALL = with_changes(RunConfig(), task="shift", n_layers=3, n_heads=2, d_model=32, encoding="rope")


def full_pattern(model, tokens: torch.Tensor, layer: int, head: int) -> torch.Tensor:
    with torch.no_grad():
        return model.attend(tokens, 0)[layer].weights[:, head].abs()  # (S, T, T)


# ALiBi: a bias of its own per head, taken for the drawn head alone (the drawn layer computes only that head)
ALIBI = with_changes(SMALL, encoding="alibi", n_heads=4)


@pytest.mark.parametrize(("config", "layer", "head", "length", "cells"),
                         [(SMALL, 0, 0, 40, 256), (SMALL, 1, 1, 101, 16), (SMALL, 2, 0, 64, 7), (ALIBI, 1, 2, 50, 256),
                          (ALIBI, 0, 3, 33, 256)])
def test_one_head_pooled_as_computed_equals_the_full_pattern_pooled(config, layer, head, length, cells):
    model = initial_model(config).eval()
    found = attention_heatmap(model, config, length, max_cells=cells, layer=layer, head=head)
    tokens = sequence_tokens(12_345, length, 1, config.task.vocab_size)
    full = full_pattern(model, tokens, layer, head)[0]
    pooled = F.max_pool2d(full[None, None], found.pool, found.pool, ceil_mode=True)[0, 0]
    assert (found.layer, found.head) == (layer, head)
    np.testing.assert_array_equal(found.weights, pooled.numpy())
    np.testing.assert_array_equal(found.argmax_keys, full.argmax(dim=1).numpy())
    assert found.weights.shape[0] <= cells


def test_the_mean_map_of_one_head_is_the_mean_of_its_weights():
    model = initial_model(SMALL).eval()
    weights, pool = head_map(model, SMALL, 48, layer=2, head=1, samples=5)
    expected = full_pattern(model, sequence_tokens(5, 48, 5, SMALL.task.vocab_size), 2, 1).mean(dim=0)
    assert pool == 1
    np.testing.assert_allclose(weights, expected.double().numpy(), atol=1e-6)
    pooled, pool = head_map(model, SMALL, 48, layer=2, head=1, samples=5, max_cells=12)
    assert pool == 4 and pooled.shape == (12, 12)


def test_a_head_or_layer_outside_the_model_is_a_clear_error():
    model = initial_model(SMALL).eval()
    for layer, head in ((3, 0), (0, 2), (-1, 0)):
        with pytest.raises(LengthError, match="layers 0 to 2, heads 0 to 1"):
            attention_heatmap(model, SMALL, 32, layer=layer, head=head)


MEASURE = textwrap.dedent(
    """
    import re, sys, torch
    from lengen.runtime import limit_heap_growth
    from lengen_core.config import RunConfig, with_changes
    from lengen_core.analysis.heatmap import attention_heatmap
    from lengen_core.models.initial import initial_model
    limit_heap_growth()
    def peak():  # this process's own high-water mark (ru_maxrss keeps the parent's across exec on Linux)
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
    layers, heads, width, length = map(int, sys.argv[1:])
    config = with_changes(RunConfig(), task="shift", n_layers=layers, n_heads=heads, d_model=width, encoding="rope")
    model = initial_model(config).eval()
    before = peak()
    found = attention_heatmap(model, config, length, layer=0, head=heads - 1)
    assert found.weights.shape == (256, 256), found.weights.shape
    print(peak() - before)
    """
)


@pytest.mark.slow  # its peak is its own process's, on one thread: it runs beside the other worker
def test_the_largest_transformer_at_the_longest_length_stays_within_its_memory_bound():
    """8 layers × 16 heads, d_model 512, 16,384 tokens: every layer's full logits and weights would
    be 8 × 16 × 16,384² × 8 bytes = 275 GB; this map needs the forward pass of one sequence up to the
    drawn layer (only the drawn head at that layer) and one block of logits: measured 0.3 GB above the loaded
    model; 21 CPU seconds (213 while the drawn layer computed all 16 heads)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    arguments = [str(MAX_LAYERS), str(MAX_HEADS), str(MAX_D_MODEL), str(MAX_HEATMAP_LENGTH)]
    done = subprocess.run([sys.executable, "-c", MEASURE, *arguments], check=False, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1_200)
    assert done.returncode == 0, done.stderr[-2000:]
    grown = int(done.stdout.split()[-1])
    assert grown < 1 << 30, f"peak memory grew by {grown / 2**20:.0f} MB"


def test_head_statistics_accumulated_block_by_block_match_the_full_patterns():
    """analyse_heads sums as the forward pass goes (one batch of sequences at a time); the same
    numbers as reading every layer's full attention of all sequences at once (the old way)."""
    from lengen_core.analysis.heads import analyse_heads
    from lengen_core.analysis.sequence import tokens_per_batch

    config = with_changes(SMALL, train_length=24, offset=5)
    model = initial_model(config).eval()
    samples = 2 * (tokens_per_batch(config) // 24) + 3  # three batches, the last a short one
    reports = analyse_heads(model, config, samples=samples)
    tokens = sequence_tokens(11, 24, samples, config.task.vocab_size)
    with torch.no_grad():
        patterns = model.attend(tokens, 0)
    t = torch.arange(5, 24)
    for report in reports:
        pattern = patterns[report.layer]
        mean = pattern.logits[:, report.head].double().mean(dim=0).numpy()
        carrier = [np.diagonal(mean, -d).mean() for d in range(24)]
        np.testing.assert_allclose(report.carrier, carrier, atol=1e-5)
        queries = pattern.weights[:, report.head, t].abs()
        share = (queries[:, torch.arange(len(t)), t - 5] / queries.sum(dim=-1)).mean()
        assert report.target_weight == pytest.approx(float(share), abs=1e-6)

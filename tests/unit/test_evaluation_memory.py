"""The single-head evaluation's memory is bounded by design (lengen_core/analysis/evaluate.py, docs/evaluation-memory.md).

`chunk_sizes` cuts keys, and samples when it must, so that the estimated chunk memory stays within
`EVAL_MEMORY_BYTES` for every vocabulary, d_model and sample count the limits allow; a V = 64,
d_model 512 evaluation that peaked at 8 GB and more before (a 4 096-key chunk of 1 024 samples'
key vectors) is measured in a fresh process and must stay within the target plus `MARGIN_BYTES`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lengen.budget import BASE_BYTES, single_head_evaluation_cost
from lengen_core.analysis import evaluate as evaluate_module
from lengen_core.analysis.evaluate import (
    EVAL_MEMORY_BYTES,
    MIN_KEY_CHUNK,
    _TokenStream,
    chunk_bytes,
    chunk_sizes,
    last_query_outputs,
    sequence_tokens,
    to_device,
)
from lengen_core.config import MAX_D_MODEL, MAX_EVAL_SAMPLES, MAX_VOCAB, RunConfig, with_changes
from lengen_core.models.initial import initial_model

ROOT = Path(__file__).resolve().parents[2]
MARGIN_BYTES = 96 << 20  # the allocator's slack, thread stacks and libraries loaded on first use
VOCABS = (2, 16, 63, MAX_VOCAB)
WIDTHS = (4, 64, 510, MAX_D_MODEL)
SAMPLES = (1, 2, 255, 1_024, MAX_EVAL_SAMPLES)


@pytest.mark.parametrize("target", [EVAL_MEMORY_BYTES, 16 << 20, 1 << 20])
def test_the_chunks_respect_the_memory_target_everywhere_the_limits_allow(target):
    for V in VOCABS:
        for C in WIDTHS:
            for S in SAMPLES:
                group, keys = chunk_sizes(V, C, S, target)
                assert 1 <= group <= S and keys >= 1
                assert chunk_bytes(V, C, group, keys) <= target, (V, C, S, group, keys)
                if group < S:  # samples are cut only when the keys of all of them do not fit
                    assert chunk_bytes(V, C, S, keys) > target and chunk_bytes(V, C, S, MIN_KEY_CHUNK) > target


def test_at_the_default_target_no_sample_count_the_limits_allow_is_cut():
    """The target leaves whole-sample chunks of at least MIN_KEY_CHUNK keys at the limits (fast)."""
    for V in VOCABS:
        for C in WIDTHS:
            group, keys = chunk_sizes(V, C, MAX_EVAL_SAMPLES)
            assert group == MAX_EVAL_SAMPLES and keys >= MIN_KEY_CHUNK


def test_a_small_target_cuts_the_samples_and_changes_no_result():
    config = with_changes(RunConfig(), vocab_size=8, d_model=16)
    model = initial_model(config)
    group, keys = chunk_sizes(8, 16, 200, target=64 << 10)
    assert 8 < group < 200 and keys < MIN_KEY_CHUNK  # groups of more samples than tokens: the shared table
    cut = last_query_outputs(model, config, 700, 200, 3, chunk=keys, sample_chunk=group)
    whole = last_query_outputs(model, config, 700, 200, 3)
    assert torch.equal(cut.targets, whole.targets) and torch.equal(cut.argmax_key, whole.argmax_key)
    torch.testing.assert_close(cut.readout, whole.readout, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cut.target_mass, whole.target_mass, rtol=1e-5, atol=1e-9)


def test_tokens_travel_in_the_narrowest_type_and_are_never_pinned_for_the_cpu(monkeypatch):
    def no_pinning(self, *args, **kwargs):
        raise AssertionError("pin_memory on a CPU evaluation")

    monkeypatch.setattr(torch.Tensor, "pin_memory", no_pinning)
    stream = _TokenStream(7, 9_000, 3, 64, torch.device("cpu"))
    tokens = stream.take(4_000, 4_200)  # two blocks, each drawn once
    assert tokens.dtype == torch.long and tokens.shape == (3, 200)
    assert torch.equal(tokens, sequence_tokens(7, 9_000, 3, 64, 4_000, 4_200))
    assert all(block.dtype == torch.uint8 and block.shape[1] == 3 for block in stream.blocks.values())  # narrow, key-major
    assert sorted(stream.blocks) == [0, 1]
    assert torch.equal(stream.take(4_200, 9_000), sequence_tokens(7, 9_000, 3, 64, 4_200, 9_000))
    assert sorted(stream.blocks) == [1, 2]  # blocks behind the chunk are let go
    cpu = torch.zeros(2, 3, dtype=torch.uint8)
    assert to_device(cpu, torch.device("cpu")) is cpu


def test_a_long_evaluation_makes_its_chunk_buffers_once(monkeypatch):
    """Every chunk's tables, columns, logits and cells go into the same buffers (`_Workspace`): the buffers an
    evaluation makes do not grow with its number of chunks. Allocating them anew each chunk cost 1.7× the time
    under the served app's fixed mmap threshold (docs/evaluation-memory.md)."""
    made: list[str] = []

    class Counting(evaluate_module._Workspace):
        def __call__(self, name, shape, dtype=torch.float32):
            before = self.buffers.get(name)
            tensor = super().__call__(name, shape, dtype)
            if self.buffers[name] is not before:
                made.append(name)
            return tensor

    monkeypatch.setattr(evaluate_module, "_Workspace", Counting)
    config = RunConfig()
    model = initial_model(config)
    counts = []
    for length in (8 * 512, 64 * 512):
        made.clear()
        last_query_outputs(model, config, length, 32, 1, chunk=512)
        counts.append(len(made))
    assert 0 < counts[0] == counts[1], counts  # 8 chunks and 64 chunks: the same buffers


def test_the_estimate_states_the_target():
    """The budget's memory for the single-head evaluation is the interpreter, the target and the
    per-sample sums, at most; and does not grow with the length."""
    config = with_changes(RunConfig(), vocab_size=MAX_VOCAB, d_model=MAX_D_MODEL)
    short = single_head_evaluation_cost(config, [1_024], MAX_EVAL_SAMPLES)
    long = single_head_evaluation_cost(config, [1 << 20], MAX_EVAL_SAMPLES)
    assert short.memory_bytes == long.memory_bytes
    assert BASE_BYTES < long.memory_bytes <= BASE_BYTES + EVAL_MEMORY_BYTES + (64 << 20)


def _probe(length: int, samples: int, *settings: str) -> dict:
    command = [sys.executable, "-m", "bench.probe", "--untrained", "--length", str(length), "--samples", str(samples)]
    for setting in settings:
        command += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.serial  # measures a peak memory
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory is read from /proc")
def test_a_wide_evaluation_peaks_within_the_target_in_a_fresh_process():
    """V = 64, d_model 512, 1 024 samples at 8 192 tokens: the old 4 096-key chunk gathered 1 024 × 4 096
    key vectors of 512 floats (8 GB); now the growth over the loaded process stays within the target."""
    figures = _probe(8_192, 1_024, "vocab_size=64", "d_model=512")
    growth = figures["peak_rss_bytes"] - figures["baseline_rss_bytes"]
    assert 0 < growth <= EVAL_MEMORY_BYTES + MARGIN_BYTES, f"{growth / 2**20:.0f} MB"

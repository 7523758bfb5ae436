"""Chunked O(L) evaluation of the last query equals the plain L×L forward pass (docs/science.md §5).

For every encoding and both attentions, on briefly trained models: the readout logits, the target
mass (softmax: the attention weight on key L-1-k; linear: |w_k| / Σ|w|) and the argmax key, for any
chunk size and any cut of the samples into groups, whichever logit table `_chunk_logits` gathers
from (the shared V×V×c table when a group has at least V samples, the group's own s×V×c otherwise).
"""

from __future__ import annotations

from typing import get_args

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lengen_core.analysis.evaluate import last_query_outputs, sequence_tokens, token_dtype
from lengen_core.config import AttentionName, EncodingName, RunConfig, with_changes
from lengen_core.training import Run, train
from tests.helpers.example_counts import fewer_examples

ENCODINGS = get_args(EncodingName)
ATTENTIONS = get_args(AttentionName)
MAX_LENGTH = 512
PLAIN_ELEMENTS = 1 << 24  # keeps the plain (S, L, L) attention of one example near 64 MB


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], Run]:
    return {
        (encoding, attention): train(with_changes(RunConfig(), encoding=encoding, attention=attention, steps=20), "cpu")
        for encoding in ENCODINGS
        for attention in ATTENTIONS
    }


def _plain(run: Run, length: int, samples: int, seed: int):
    """Readout logits (S, V), target mass (S,) and last-query logits (S, L) from the full forward pass."""
    config = run.config
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size)  # (S, L)
    with torch.no_grad():
        readout = run.model(tokens, query_start=length - 1)[:, -1]  # (S, V)
        pattern = run.model.attend(tokens, query_start=length - 1)[0]
    logits, weights = pattern.logits[:, 0, -1], pattern.weights[:, 0, -1]  # (S, L) each
    target = length - 1 - config.task.offset
    if config.model.attention == "softmax":
        mass = weights[:, target]
    else:
        mass = weights[:, target].abs() / weights.abs().sum(dim=1)
    return readout, mass, logits, tokens


@st.composite
def cases(draw) -> tuple[int, int]:
    length = draw(st.integers(4, MAX_LENGTH))  # the default offset is 3: the answer needs L > 3
    samples = draw(st.integers(1, max(1, min(300, PLAIN_ELEMENTS // (length * length)))))
    return length, samples


# One example runs the plain (S, L, L) attention of up to PLAIN_ELEMENTS elements and the chunked
# evaluation: the largest take about a second (measured on a loaded 2-core machine), far past any deadline.
@fewer_examples(4, deadline=None)
@given(
    encoding=st.sampled_from(ENCODINGS),
    attention=st.sampled_from(ATTENTIONS),
    case=cases(),
    chunk=st.one_of(st.sampled_from([None, 1, 7, 64, 4096]), st.integers(1, 600)),
    sample_chunk=st.one_of(st.none(), st.integers(1, 40)),
    seed=st.integers(0, 2**31 - 1),
)
@example(encoding="rope", attention="softmax", case=(MAX_LENGTH, 64), chunk=7, sample_chunk=None, seed=0)
@example(encoding="learned", attention="softmax", case=(MAX_LENGTH, 64), chunk=64, sample_chunk=5, seed=1)
@example(encoding="alibi", attention="linear", case=(MAX_LENGTH, 64), chunk=4096, sample_chunk=17, seed=2)
@example(encoding="sinusoidal", attention="linear", case=(200, 300), chunk=7, sample_chunk=None, seed=3)
@example(encoding="nope", attention="softmax", case=(100, 256), chunk=64, sample_chunk=40, seed=4)
@example(encoding="rope", attention="linear", case=(300, 37), chunk=100, sample_chunk=16, seed=5)  # a short last group
def test_chunked_last_query_equals_the_plain_forward_pass(runs, encoding, attention, case, chunk, sample_chunk, seed):
    length, samples = case
    run = runs[encoding, attention]
    chunked = last_query_outputs(run.model, run.config, length, samples, seed, chunk=chunk, sample_chunk=sample_chunk)
    readout, mass, logits, tokens = _plain(run, length, samples, seed)

    assert torch.equal(chunked.targets, tokens[:, length - 1 - run.config.task.offset])
    scale = readout.abs().max().item() + 1.0
    torch.testing.assert_close(chunked.readout, readout, rtol=1e-4, atol=1e-5 * scale)
    torch.testing.assert_close(chunked.target_mass, mass, rtol=1e-4, atol=1e-6)

    # The argmax key: any maximiser of the plain logits (NoPE logits tie between keys of one token),
    # and the plain argmax itself wherever the maximum is clear.
    best, runner_up = logits.topk(2, dim=1).values.unbind(1)  # (S,) each
    tolerance = 1e-5 * (logits.abs().max().item() + 1.0)
    at_chunked = logits.gather(1, chunked.argmax_key[:, None])[:, 0]
    assert (at_chunked >= best - tolerance).all()
    clear = best - runner_up > 10 * tolerance
    assert torch.equal(chunked.argmax_key[clear], logits.argmax(dim=1)[clear])


def test_evaluation_works_for_the_largest_run_seed(runs):
    run = runs["rope", "softmax"]
    outputs = last_query_outputs(run.model, run.config, 16, 8, seed=2**31 - 1)
    assert outputs.readout.shape == (8, run.config.task.vocab_size)


def test_sequence_tokens_do_not_depend_on_how_they_are_sliced():
    whole = sequence_tokens(5, 9_000, 3, 16)  # spans three token blocks
    pieces = torch.cat(
        [
            sequence_tokens(5, 9_000, 3, 16, start, stop)
            for start, stop in ((0, 7), (7, 4_100), (4_100, 8_999), (8_999, 9_000))
        ],
        dim=1,
    )
    assert whole.shape == (3, 9_000)
    assert torch.equal(whole, pieces)
    assert not torch.equal(sequence_tokens(6, 9_000, 3, 16), whole)


def test_the_evaluation_sample_is_the_same_for_every_chunk_size(runs):
    run = runs["rope", "softmax"]
    cuts = [(1, None), (13, None), (300, None), (None, None), (13, 1), (300, 5), (None, 16), (4_096, 31)]
    outputs = [last_query_outputs(run.model, run.config, 300, 32, 9, chunk=chunk, sample_chunk=group)
               for chunk, group in cuts]
    for other in outputs[1:]:
        assert torch.equal(other.targets, outputs[0].targets)
        assert torch.equal(other.argmax_key, outputs[0].argmax_key)
        torch.testing.assert_close(other.readout, outputs[0].readout, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(other.target_mass, outputs[0].target_mass, rtol=1e-4, atol=1e-7)


def test_evaluation_tokens_are_the_same_in_every_integer_type():
    """Evaluation draws its tokens as uint8 (V ≤ 256); they are the int64 sequences of `sequence_tokens`."""
    for vocab_size, dtype in ((2, torch.uint8), (64, torch.uint8), (256, torch.uint8), (300, torch.int16),
                              (70_000, torch.int32)):
        assert token_dtype(vocab_size) == dtype
        narrow = sequence_tokens(3, 5_000, 4, vocab_size, 4_000, 4_200, dtype=dtype)
        assert narrow.dtype == dtype
        assert torch.equal(narrow.long(), sequence_tokens(3, 5_000, 4, vocab_size, 4_000, 4_200))

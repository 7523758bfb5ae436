"""Full-sequence evaluation a block of queries at a time equals the plain computation (docs/science.md §5, C8).

`attention.blocked_attention` holds the logits of one block of queries (at most
`QUERY_BLOCK_ELEMENTS` of them), the transformer's blocks project and run the MLP a span of positions
at a time when evaluating (`ROW_SPAN_ELEMENTS`), and `sequence.evaluate_sequence` runs the samples in
batches of `TOKENS_PER_BATCH` tokens. With both made tiny, so that a length of a few hundred is cut into many
blocks and batches, the model outputs, the attention patterns and the evaluation reports must equal
those of the unpatched code, which at these lengths attends all queries in one block, and the
reports must equal what a plain pass over the full (T, T) attention gives. For the minimal head and
the transformer, softmax and linear attention, every encoding; briefly trained models (20 steps).

Float sums over blocks of different shapes may round differently (measured: 1e-6), so discrete
results (accuracy, argmax key, carrier head) are compared exactly only where the plain computation
has no near-tie, and continuous ones to a relative 1e-4.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import get_args

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lengen_core.analysis import sequence
from lengen_core.analysis.evaluate import evaluate, sequence_tokens
from lengen_core.analysis.sequence import SequenceReport, evaluate_sequence
from lengen_core.config import AttentionName, EncodingName, RunConfig, with_changes
from lengen_core.models import attention, transformer
from lengen_core.tasks import query_start, targets_of
from lengen_core.training import Run, train
from tests.helpers.example_counts import fewer_examples

ENCODINGS = get_args(EncodingName)
ATTENTIONS = get_args(AttentionName)
SHAPES = {"minimal": {"n_layers": 0, "n_heads": 1}, "transformer": {"n_layers": 2, "n_heads": 2}}
MAX_LENGTH = 256
TIE = 1e-4  # relative gap below which two logits or weights count as tied


_RUNS: dict[tuple[str, ...], Run] = {}


def briefly_trained(shape: str, encoding: str, attention_name: str, task: str = "shift") -> Run:
    """Trained for 20 steps on first use, then kept for the module (hypothesis calls many times)."""
    key = (shape, encoding, attention_name, task)
    if key not in _RUNS:
        config = with_changes(RunConfig(), task=task, encoding=encoding, attention=attention_name, steps=20,
                              **SHAPES[shape])
        _RUNS[key] = train(config, "cpu")
    return _RUNS[key]


@contextmanager
def blocks_of(queries: int, batch: int | None = None, heads: int = 1, length: int = 1) -> Iterator[None]:
    """Patch the block sizes: `queries` queries per attention block for a batch of `batch`
    sequences (every batch when `batch` is None: QUERY_BLOCK_ELEMENTS = queries), the transformer's
    spans of positions (projections, MLP) to about `queries` positions, and evaluation batches of
    `batch` sequences."""
    elements = queries if batch is None else queries * batch * heads * length
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attention, "QUERY_BLOCK_ELEMENTS", elements)
        # the transformer's per-position work in spans of about `queries` positions (d_model 128 here)
        patch.setattr(transformer, "ROW_SPAN_ELEMENTS", queries * (batch or 1) * 4 * RunConfig().model.d_model)
        if batch is not None:
            patch.setattr(sequence, "TOKENS_PER_BATCH", batch * length)
        yield


# --- model outputs and attention patterns -------------------------------------------------------


# One example runs a model over up to 256 tokens five times, and the first to draw a (shape,
# encoding, attention) trains that model (20 steps): no deadline fits.
@pytest.mark.slow  # 24 s in the fast tier; test_blocked_evaluation_equals_the_plain_one below stays there
@fewer_examples(8, deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    encoding=st.sampled_from(ENCODINGS),
    attention_name=st.sampled_from(ATTENTIONS),
    length=st.integers(4, MAX_LENGTH),
    samples=st.integers(1, 4),
    elements=st.one_of(st.sampled_from([1, 7, 100]), st.integers(1, 5_000)),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
@example(shape="transformer", encoding="rope", attention_name="softmax", length=MAX_LENGTH, samples=2, elements=1,
         seed=0, data=None)
@example(shape="minimal", encoding="learned", attention_name="linear", length=MAX_LENGTH, samples=3, elements=1,
         seed=1, data=None)
@example(shape="transformer", encoding="alibi", attention_name="linear", length=97, samples=4, elements=7, seed=2,
         data=None)
def test_blocked_outputs_and_patterns_equal_the_plain_ones(
    shape, encoding, attention_name, length, samples, elements, seed, data
):
    run = briefly_trained(shape, encoding, attention_name)
    model = run.model
    start = 0 if data is None else data.draw(st.integers(0, length - 1), label="query_start")
    tokens = sequence_tokens(seed, length, samples, run.config.task.vocab_size)  # (S, L)
    with torch.no_grad():
        plain, plain_patterns = model(tokens, query_start=start), model.attend(tokens, start)
        with blocks_of(elements):
            blocked, blocked_patterns = model(tokens, query_start=start), model.attend(tokens, start)
            seen: list[tuple[int, int, int]] = []
            model(tokens, query_start=start, observe=lambda layer, first, _, w: seen.append((layer, first, w.shape[2])))

    # the blocks tile the queries of every layer (the observer makes every layer attend from 0 in
    # the transformer), and when a block may hold one logit element, each block is one query
    first_query = start if shape == "minimal" else 0
    for layer in range(model.n_layers):
        spans = [(first, size) for index, first, size in seen if index == layer]
        starts = [first_query + sum(size for _, size in spans[:i]) for i in range(len(spans))]
        assert [first for first, _ in spans] == starts  # consecutive, no gap, no overlap
        assert sum(size for _, size in spans) == length - first_query
        if elements == 1:
            assert all(size == 1 for _, size in spans)

    scale = plain.abs().max().item() + 1.0
    torch.testing.assert_close(blocked, plain, rtol=1e-4, atol=1e-5 * scale)
    assert len(blocked_patterns) == len(plain_patterns) == model.n_layers
    for b, p in zip(blocked_patterns, plain_patterns, strict=True):
        assert b.layer == p.layer and b.weights.shape == p.weights.shape
        logit_scale = p.logits.abs().max().item() + 1.0
        torch.testing.assert_close(b.logits, p.logits, rtol=1e-4, atol=1e-5 * logit_scale)
        torch.testing.assert_close(b.weights, p.weights, rtol=1e-4, atol=1e-5 * logit_scale)


# --- evaluation reports ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Plain:
    """What one pass over the full (T, T) attention says about the evaluation sequences."""

    hits: torch.Tensor  # (S, Tq) bool
    ties: torch.Tensor  # (S, Tq) bool: top two readout logits within TIE
    mass: torch.Tensor  # (layers, H): mean share |w_k|/Σ|w| on key t − k over supervised queries
    last_keys: torch.Tensor  # (layers, H, S): argmax key of the last query
    last_clear: torch.Tensor  # (layers, H): every sample's last-query argmax is clear


@torch.no_grad()
def plain_evaluation(run: Run, length: int, samples: int, seed: int) -> Plain:
    task = run.config.task
    tokens = sequence_tokens(seed, length, samples, task.vocab_size)  # the evaluation's own sequences
    first = query_start(task, length)
    readout = run.model(tokens, query_start=first)  # (S, Tq, V)
    top = readout.topk(2, dim=-1).values  # (S, Tq, 2)
    ties = top[..., 0] - top[..., 1] <= TIE * (readout.abs().max() + 1.0)
    t = torch.arange(first, length)
    mass, keys, clear = [], [], []
    for pattern in run.model.attend(tokens, 0):  # (S, H, T, T) every layer
        weights = pattern.weights.abs()
        rows = weights[:, :, t]  # (S, H, q, T)
        mass.append((weights[:, :, t, t - task.offset] / rows.sum(dim=-1)).mean(dim=(0, 2)))  # (H,)
        last = weights[:, :, -1]  # (S, H, T)
        best = last.topk(min(2, length), dim=-1).values  # (S, H, 2)
        keys.append(last.argmax(dim=-1).T)  # (H, S)
        clear.append((best[..., 0] - best[..., -1] > TIE * (last.max() + 1e-12)).all(dim=0))  # (H,)
    hits = readout.argmax(-1) == targets_of(task, tokens)
    return Plain(hits, ties, torch.stack(mass), torch.stack(keys), torch.stack(clear))


def assert_report_matches(report: SequenceReport, plain: Plain, train_length: int, first: int) -> None:
    """The report against the plain pass: exact where there is no tie, within the ties otherwise."""
    hits, ties = plain.hits.float(), plain.ties.float()
    assert report.samples == hits.shape[0]
    assert abs(report.accuracy * hits.numel() - hits.sum().item()) <= ties.sum().item() + 1e-6
    beyond = slice(max(0, train_length - first), None)
    if report.length > train_length:
        allowed = ties[:, beyond].sum().item() / max(1, hits[:, beyond].numel())
        assert abs(report.accuracy_beyond - hits[:, beyond].mean().item()) <= allowed + 1e-6
    else:
        assert report.accuracy_beyond is None
    if len(report.positions) == hits.shape[1]:  # one bin per position
        torch.testing.assert_close(torch.as_tensor(report.accuracy_by_position, dtype=torch.float32),
                                   hits.mean(dim=0), rtol=0, atol=ties.sum(dim=0).max().item() / hits.shape[0] + 1e-6)
    mass = plain.mass.flatten()
    layer, head = report.carrier_layer, report.carrier_head
    torch.testing.assert_close(report.target_mass, plain.mass[layer, head].item(), rtol=1e-4, atol=1e-6)
    ranked = mass.topk(min(2, mass.numel())).values
    if ranked[0] - ranked[-1] > TIE * ranked[0] or mass.numel() == 1:
        assert (layer, head) == divmod(int(mass.argmax()), plain.mass.shape[1])
        if plain.last_clear[layer, head]:
            assert report.argmax_key == int(plain.last_keys[layer, head].mode().values)
    assert 0 <= report.argmax_key < report.length


# One example evaluates a model over up to 12 sequences of up to 256 tokens twice, and the plain
# (T, T) pass once; the first to draw a model trains it (20 steps): no deadline fits.
@fewer_examples(8, deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    encoding=st.sampled_from(ENCODINGS),
    attention_name=st.sampled_from(ATTENTIONS),
    length=st.integers(4, MAX_LENGTH),
    samples=st.integers(1, 12),
    batch=st.integers(1, 12),
    queries=st.integers(1, 40),
    seed=st.integers(0, 2**31 - 1),
)
@example(shape="transformer", encoding="rope", attention_name="softmax", length=MAX_LENGTH, samples=7, batch=3,
         queries=3, seed=0)
@example(shape="minimal", encoding="rope", attention_name="softmax", length=MAX_LENGTH, samples=7, batch=3,
         queries=1, seed=1)
@example(shape="transformer", encoding="learned", attention_name="linear", length=64, samples=5, batch=2,
         queries=5, seed=2)
@example(shape="minimal", encoding="nope", attention_name="linear", length=16, samples=12, batch=12, queries=1,
         seed=3)
def test_blocked_evaluation_equals_the_plain_one(
    shape, encoding, attention_name, length, samples, batch, queries, seed
):
    run = briefly_trained(shape, encoding, attention_name)
    config = run.config
    first = query_start(config.task, length)
    plain_report = evaluate_sequence(run.model, config, [length], samples=samples, seed=seed)[0]
    with blocks_of(queries, batch=min(batch, samples), heads=config.model.n_heads, length=length):
        blocked_report = evaluate_sequence(run.model, config, [length], samples=samples, seed=seed)[0]
    plain = plain_evaluation(run, length, samples, seed)
    for report in (plain_report, blocked_report):
        assert report.length == length
        assert_report_matches(report, plain, config.task.train_length, first)


def test_a_transformer_first_block_that_reaches_the_first_supervised_query() -> None:
    run = briefly_trained("transformer", "rope", "softmax")
    plain = evaluate_sequence(run.model, run.config, [64], samples=4, seed=5)[0]
    with blocks_of(4, batch=4, heads=2, length=64):  # 4 queries a block: covers 0 … 3, first is 3
        blocked = evaluate_sequence(run.model, run.config, [64], samples=4, seed=5)[0]
    assert blocked.accuracy == plain.accuracy
    assert blocked.argmax_key == plain.argmax_key


def test_a_transformer_block_that_ends_before_the_first_supervised_query() -> None:
    run = briefly_trained("transformer", "rope", "softmax")
    plain = evaluate_sequence(run.model, run.config, [64], samples=4, seed=5)[0]
    with blocks_of(1):  # one query a block: block 0 holds query 0 only, the first supervised query is 3
        blocked = evaluate_sequence(run.model, run.config, [64], samples=4, seed=5)[0]
    assert blocked.accuracy == plain.accuracy


# --- the retrieval task: full-sequence evaluation against the O(L) last-query evaluation ----------


@pytest.mark.parametrize("encoding", ["rope", "learned", "alibi"])
def test_sequence_evaluation_of_retrieval_equals_the_last_query_evaluation(encoding: str) -> None:
    run = briefly_trained("minimal", encoding, "softmax", task="retrieval")
    lengths = [16, 40, 200]
    full = evaluate_sequence(run.model, run.config, lengths, samples=64, seed=3)
    last = evaluate(run.model, run.config, lengths, samples=64, seed=3)
    for f, q in zip(full, last, strict=True):
        assert f.accuracy == pytest.approx(q.accuracy, abs=2 / 64)  # at most two near-ties apart
        assert f.accuracy_beyond == (None if f.length <= 16 else f.accuracy)  # the query is the last position
        assert f.target_mass == pytest.approx(q.target_mass, rel=1e-4, abs=1e-6)
        assert f.argmax_key == q.argmax_key


def test_linear_target_mass_is_the_same_fraction_in_both_evaluations() -> None:
    run = briefly_trained("minimal", "rope", "linear", task="retrieval")
    full = evaluate_sequence(run.model, run.config, [16, 64], samples=64, seed=3)
    last = evaluate(run.model, run.config, [16, 64], samples=64, seed=3)
    for f, q in zip(full, last, strict=True):
        assert 0.0 <= f.target_mass <= 1.0
        assert f.target_mass == pytest.approx(q.target_mass, rel=1e-4, abs=1e-6)

"""The transformer of docs/science.md §3 on the shift task (C8), measured on the CPU.

RoPE (2 layers, 2 heads, seed 0) is exact at the training length and stays above 0.9 at 4×;
learned positions are exact in range and at chance beyond it; the per-head analysis finds a RoPE
carrier head (argmax offset k, Toeplitz) and a learned head pinned inside the training range.
Each run is trained once per session (tests/unit/conftest.py). Margins are the ones the product
promises; if one fails, report the numbers rather than loosen it.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from lengen_core.analysis.carrier import effective_rank, toeplitz_fraction
from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.analysis.heads import HeadReport, analyse_heads
from lengen_core.analysis.sequence import SequenceReport, evaluate_sequence
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.head import MinimalHead, build_model
from lengen_core.models.transformer import Transformer

# Early stop after 50 steps at full accuracy rather than the default 200: the same heads and margins
# (measured), at about half the training time.
TRANSFORMER = {"task": "shift", "n_layers": 2, "n_heads": 2, "patience": 50}
SHIFT = with_changes(RunConfig(), **TRANSFORMER)
L_TRAIN, OFFSET, V = SHIFT.task.train_length, SHIFT.task.offset, SHIFT.task.vocab_size
LENGTHS = [L_TRAIN, 2 * L_TRAIN, 4 * L_TRAIN]
SAMPLES = 128
PAST_THE_FIRST_FEW = 8  # positions t ≥ 8: every query has seen a few keys before its target
HEAD_SAMPLES, HEAD_SEED = 256, 11  # the per-head analysis's sequences, recomputed plainly below


def _reports(run) -> dict[int, SequenceReport]:
    return {r.length: r for r in evaluate_sequence(run.model, run.config, LENGTHS, samples=SAMPLES)}


def _accuracy_from(report: SequenceReport, first_position: int) -> float:
    """Mean accuracy over positions ≥ first_position (bins are single positions at these lengths)."""
    assert len(report.positions) == report.length - OFFSET  # one bin per supervised position
    return float(report.accuracy_by_position[report.positions >= first_position].mean())


@pytest.fixture(scope="module")
def rope(trained):
    return trained(encoding="rope", **TRANSFORMER)  # 77 steps


@pytest.fixture(scope="module")
def learned(trained):
    return trained(encoding="learned", **TRANSFORMER)  # 304 steps


@pytest.fixture(scope="module")
def rope_reports(rope) -> dict[int, SequenceReport]:
    return _reports(rope)


@pytest.fixture(scope="module")
def learned_reports(learned) -> dict[int, SequenceReport]:
    return _reports(learned)


@pytest.fixture(scope="module")
def rope_heads(rope) -> list[HeadReport]:
    return analyse_heads(rope.model, rope.config, samples=HEAD_SAMPLES, seed=HEAD_SEED)


@pytest.fixture(scope="module")
def learned_heads(learned) -> list[HeadReport]:
    return analyse_heads(learned.model, learned.config, samples=HEAD_SAMPLES, seed=HEAD_SEED)


# --- C8: the phenomenon carries over -------------------------------------------------------------


def test_the_runs_are_transformers_trained_on_shift(rope, learned) -> None:
    for run in (rope, learned):
        assert isinstance(run.model, Transformer)
        assert run.model.n_layers == 2 and run.config.task.task == "shift"
        assert run.train_accuracy == 1.0


def test_rope_transformer_is_exact_in_range_and_extrapolates_to_four_times(rope_reports) -> None:
    at_train, at_2x, at_4x = (rope_reports[n] for n in LENGTHS)
    assert at_train.accuracy >= 0.99  # measured 1.000
    assert at_train.accuracy_beyond is None  # nothing lies beyond the training length
    assert at_2x.accuracy_beyond >= 0.99  # measured 1.000
    assert at_4x.accuracy_beyond >= 0.9  # measured 0.988
    assert _accuracy_from(at_4x, PAST_THE_FIRST_FEW) >= 0.9  # measured 0.990
    assert at_4x.accuracy_by_position.min() >= 0.75  # measured 0.89, at the last positions: dilution


def test_learned_transformer_is_exact_in_range_and_at_chance_beyond_it(learned_reports) -> None:
    assert learned_reports[L_TRAIN].accuracy >= 0.99  # measured 1.000
    for length in LENGTHS[1:]:
        report = learned_reports[length]
        # Where query and target are both rows training never wrote (t − k ≥ L_train): chance. Measured 0.063–0.088
        # over seeds 0–2 at 2× and 4×; chance 0.0625.
        past = report.accuracy_by_position[report.positions >= L_TRAIN + OFFSET]
        assert past.mean() <= 2 / V, length
        # Over every t ≥ L_train, one position more may be right: the query at t = p + k reads its target where the
        # heads pin the last queries (p = 15 on seeds 1 and 2: 0.91 at t = 18, 0.139 over 2× where seed 0, pinned
        # at 12, reads 0.065). Which row they pin is the trajectory's choice and differs across CPUs.
        assert report.accuracy_beyond <= 2 / V + 1 / (length - L_TRAIN), length
        # causal: positions inside the training range see exactly what they saw in training
        assert _accuracy_from(report, 0) > report.accuracy_beyond
        in_range = report.accuracy_by_position[report.positions < L_TRAIN]
        assert in_range.min() >= 0.99, length


def test_the_rope_carrier_head_reads_the_key_at_the_offset_at_every_length(rope_reports, rope_heads) -> None:
    carriers = {(h.layer, h.head) for h in rope_heads if h.is_carrier}
    for length, report in rope_reports.items():
        assert (report.carrier_layer, report.carrier_head) in carriers, length
        assert report.argmax_key == length - 1 - OFFSET, length  # the last query attends to t − k
        assert report.target_mass >= 0.9, length  # measured 0.994, 0.987, 0.935


# Where a learned table pins the last query is the trajectory's choice, not the claim: for one seed the key differs
# from CPU to CPU (seed 0: 9 where first measured, 12 on another x86 CPU, 15 at 2× on a third; seeds 1 and 2: 15 at
# 2× and 4×). The claim is that it lies inside the training range (< L_train), on rows training wrote; not pinned,
# the query would read its target t − k = 2 L_train − 1 − k (28 at 2×) or keys past L_train.
PIN_SEEDS = (0, 1, 2)


def test_the_learned_head_pins_the_last_query_inside_the_training_range(learned_reports) -> None:
    for length in LENGTHS[1:]:
        assert learned_reports[length].argmax_key < L_TRAIN, length  # seed 0; over seeds: the slow test below


@pytest.mark.slow
def test_learned_heads_pin_the_last_query_inside_the_training_range_over_seeds(trained) -> None:
    """The claim over three seeds (one to three minutes of training each on one core), with a margin: at 2×
    and 4× a majority of the seeds pin inside the training range, and none reads the target (measured: every
    seed inside, keys 12, 15, 15)."""
    keys = {length: [] for length in LENGTHS[1:]}
    for seed in PIN_SEEDS:
        run = trained(encoding="learned", **TRANSFORMER, **({"seed": seed} if seed else {}))  # seed 0: `learned`'s run
        assert run.train_accuracy == 1.0, seed  # it learned the task in range
        for report in _reports(run).values():
            if report.length in keys:
                keys[report.length].append(report.argmax_key)
    for length, found in keys.items():
        assert sum(key < L_TRAIN for key in found) * 2 > len(found), (length, found)
        assert length - 1 - OFFSET not in found, (length, found)


# --- per-head analysis ---------------------------------------------------------------------------


@torch.no_grad()
def _plain_head_figures(model) -> dict[tuple[int, int], dict]:
    """Per (layer, head), from recorded attention and one query at a time: the mean logit matrix at
    the training length, the mean weight on key t − k over queries t ≥ k, and at 4 × L_train the most
    common argmax key of the queries beyond the training range and its share (over the first
    max(16, samples // 4) sequences, as analyse_heads samples it)."""
    tokens = sequence_tokens(HEAD_SEED, L_TRAIN, HEAD_SAMPLES, V)  # (S, L)
    long_tokens = sequence_tokens(HEAD_SEED, 4 * L_TRAIN, max(16, HEAD_SAMPLES // 4), V)  # (S', 4L)
    figures = {}
    for pattern, long_pattern in zip(model.attend(tokens, 0), model.attend(long_tokens, 0), strict=True):
        for head in range(pattern.logits.shape[1]):
            weights = pattern.weights[:, head].double()  # (S, T, T)
            shares = [weights[:, t, t - OFFSET] / weights[:, t].sum(dim=-1) for t in range(OFFSET, L_TRAIN)]
            keys = Counter()
            for sample in long_pattern.weights[:, head]:  # (4L, 4L)
                keys.update(int(row.argmax()) for row in sample[L_TRAIN:])
            key, count = keys.most_common(1)[0]
            figures[pattern.layer, head] = {
                "matrix": pattern.logits[:, head].double().mean(dim=0).numpy(),  # (T, T)
                "target_weight": float(torch.stack(shares).mean()),
                "pinned": (key, count / keys.total()),
            }
    return figures


def test_analyse_heads_reports_every_layer_and_head(rope, learned, rope_heads, learned_heads) -> None:
    for run, heads in ((rope, rope_heads), (learned, learned_heads)):
        plain = _plain_head_figures(run.model)
        assert [(h.layer, h.head) for h in heads] == [(0, 0), (0, 1), (1, 0), (1, 1)] == list(plain)
        for h in heads:
            figures = plain[h.layer, h.head]
            matrix = figures["matrix"]
            diagonal_means = [np.mean([matrix[t, t - d] for t in range(d, L_TRAIN)]) for d in range(L_TRAIN)]
            np.testing.assert_allclose(h.carrier, diagonal_means, rtol=1e-5, atol=1e-6)  # s(Δ), Δ = 0 … L - 1
            assert h.argmax_offset == int(np.argmax(h.carrier))
            # the Toeplitz fraction and the rank are those of this head's mean logit matrix, centred as
            # lengen_core.analysis.carrier defines them (the metrics themselves are pinned in test_carrier.py)
            assert h.toeplitz_fraction == pytest.approx(toeplitz_fraction(matrix), rel=1e-5)
            assert h.effective_rank == effective_rank(np.linalg.svd(matrix - matrix.mean(), compute_uv=False))
            assert h.target_weight == pytest.approx(figures["target_weight"], rel=1e-5)
            assert h.is_carrier == (h.argmax_offset == OFFSET and h.target_weight >= 0.5)
            key, share = figures["pinned"]
            assert h.pinned_share == pytest.approx(share, abs=1e-7)  # a count of 3,072: float32 rounding only
            assert h.pinned_key == (key if key < L_TRAIN and share >= 0.5 else None)


def test_a_rope_head_is_a_toeplitz_carrier_at_the_offset(rope_heads) -> None:
    carriers = [h for h in rope_heads if h.is_carrier]
    assert carriers  # measured: both layer-1 heads (weight on the target 0.99), Toeplitz 0.9997
    assert all(h.argmax_offset == OFFSET and h.toeplitz_fraction >= 0.95 for h in carriers)
    # At d_model 64 every head peaked at k with Toeplitz ≥ 0.95 was a carrier head; at d_model 128 (the recipe) the
    # layer-0 heads peak at k (Toeplitz 0.999) but put 0.47–0.50 of their weight on it, just under CARRIER_WEIGHT.
    assert all(h.pinned_key is None for h in rope_heads)  # relative positions pin nothing


def test_a_learned_head_is_pinned_inside_the_training_range(learned_heads) -> None:
    pinned = [h for h in learned_heads if h.pinned_key is not None]
    assert pinned  # first measured: layer-0 heads at key 12 (0.95, 0.91), layer 1 head 1 at 9 (0.57); CPUs differ
    assert all(0 <= h.pinned_key < L_TRAIN and h.pinned_share >= 0.5 for h in pinned)
    # Not equivariant: RoPE's carriers are ≥ 0.999. Measured 0.64 where first measured, 0.76 on another CPU, and
    # 0.52 and 0.79 on seeds 1 and 2 there: the trajectory's, so the bound is 0.9, above all and below RoPE's.
    assert max(h.toeplitz_fraction for h in learned_heads) < 0.9


# --- the minimal head on shift -------------------------------------------------------------------


def test_the_minimal_head_still_learns_the_shift_task(trained) -> None:
    run = trained(task="shift")
    assert isinstance(run.model, MinimalHead)
    report = evaluate_sequence(run.model, run.config, [L_TRAIN], samples=SAMPLES)[0]
    assert report.accuracy >= 0.99  # measured 1.000
    assert (report.carrier_layer, report.carrier_head) == (0, 0)
    assert report.argmax_key == L_TRAIN - 1 - OFFSET


# --- structure: attention patterns and query_start ------------------------------------------------


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("query_start", [0, 5])
def test_attend_gives_one_causal_pattern_per_layer(attention: str, query_start: int) -> None:
    config = with_changes(SHIFT, attention=attention, n_layers=3, n_heads=4)
    model = build_model(config, torch.Generator().manual_seed(0)).eval()
    B, T, H = 3, 20, 4
    tokens = torch.randint(V, (B, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        patterns = model.attend(tokens, query_start)
    queries = torch.arange(query_start, T)
    visible = torch.arange(T)[None, :] <= queries[:, None]  # (Tq, T)
    assert [p.layer for p in patterns] == [0, 1, 2]
    for p in patterns:
        assert p.logits.shape == p.weights.shape == (B, H, T - query_start, T)
        assert (p.weights[..., ~visible] == 0).all()  # no weight on future keys
        if attention == "softmax":
            torch.testing.assert_close(p.weights.sum(-1), torch.ones(B, H, T - query_start))
        else:  # linear attention: the weights are the visible logits themselves
            torch.testing.assert_close(p.weights, p.logits.masked_fill(~visible, 0.0), rtol=0, atol=0)


@pytest.mark.parametrize("encoding", ["rope", "learned", "alibi"])
def test_forward_from_a_query_start_equals_the_full_forward_sliced(encoding: str) -> None:
    config = with_changes(SHIFT, encoding=encoding, n_layers=2, n_heads=2)
    model = build_model(config, torch.Generator().manual_seed(0)).eval()
    tokens = torch.randint(V, (4, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(tokens, query_start=0)  # (B, T, V)
        skipped = model(tokens, query_start=10)  # the last layer computes queries 10 … T-1 only
        observed = model(tokens, query_start=10, observe=lambda *record: None)  # every layer, every query
    assert full.shape == (4, 24, V) and skipped.shape == observed.shape == (4, 14, V)
    torch.testing.assert_close(skipped, full[:, 10:], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(observed, full[:, 10:], rtol=1e-5, atol=1e-5)

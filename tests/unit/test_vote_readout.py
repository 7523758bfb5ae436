"""The ideal vote readout (issue 27): measured on the evaluation's own sequences and attention weights, the
token with the most attention weight answers. It equals the plain forward pass's count, whatever the
chunking, is carried by `measure` and the command line's JSON, and stored numbers without it still read.

On V 40, k 11, L_train 40, seed 9 (the slow test) it shows the readout-limited regime: at 640 tokens p is
above 2/V while the model is at chance, yet the vote readout answers most sequences."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lengen import first_visit
from lengen.results import length_row
from lengen_core.analysis.carrier import find_near_recurrences
from lengen_core.analysis.evaluate import LengthReport, evaluate, last_query_outputs, sequence_tokens
from lengen_core.measure import measure
from ui.captions import accuracy as accuracy_captions
from ui.captions import readouts


def plain_votes(run, length: int, samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The most attended token of each sample's last query, from the full L×L forward pass, and the targets."""
    tokens = sequence_tokens(seed, length, samples, run.config.task.vocab_size)
    with torch.no_grad():
        weights = run.model.attend(tokens, query_start=length - 1)[0].weights[:, 0, -1]  # (S, L)
    counts = torch.zeros(samples, run.config.task.vocab_size).scatter_add_(1, tokens, weights)
    return counts.argmax(dim=1), tokens[:, length - 1 - run.config.task.offset]


def test_the_vote_readout_is_the_most_attended_token_whatever_the_chunks(rope):
    for length in (16, 200):
        votes, targets = plain_votes(rope, length, 48, seed=3)
        for chunk, group in ((None, None), (7, 5)):
            out = last_query_outputs(rope.model, rope.config, length, 48, seed=3, chunk=chunk, sample_chunk=group)
            assert torch.equal(out.vote, votes)
        report = evaluate(rope.model, rope.config, [length], samples=48, seed=3)[0]
        assert report.vote_accuracy == pytest.approx(float((votes == targets).float().mean()))
    # at the training length a learned head attends to its target: the vote answers like the model
    report = evaluate(rope.model, rope.config, [16], samples=256)[0]
    assert report.vote_accuracy >= 0.9 and report.accuracy >= 0.9


def test_measure_and_the_command_line_carry_it_and_old_numbers_still_read(rope):
    m = measure(rope, [16, 64], samples=64)
    assert all(0 <= r.vote_accuracy <= 1 for r in m.reports)
    row = length_row(m.reports[1], m.predictions[1], None, 16, "none")
    assert row["vote_accuracy"] == m.reports[1].vote_accuracy
    stored = first_visit.to_dict(first_visit.Shipped({64: {n: r for n, r in zip(m.lengths, m.reports, strict=True)}}))
    assert first_visit.from_dict(stored).evaluations[64][64] == m.reports[1]
    for by_length in stored["evaluations"].values():  # a file written before the field existed
        for fields in by_length.values():
            del fields["vote_accuracy"]
    old = first_visit.from_dict(stored)
    assert old is not None and old.evaluations[64][64].vote_accuracy is None
    assert old.evaluations[64][64] == dataclasses.replace(m.reports[1], vote_accuracy=None)
    assert LengthReport(**{k: v for k, v in dataclasses.asdict(m.reports[0]).items() if k != "vote_accuracy"})


@pytest.mark.slow
def test_the_readout_limits_on_v40_k11_seed9_and_a_step_sits_at_a_near_recurrence(trained):
    """Issue 27's config (V 40, k 11, L_train 40, seed 9): p = 0.158 > 2/V at 640 tokens yet accuracy 0.026
    (chance), the vote readout about 0.78; accuracy 0.963 at 112 tokens, 0.852 at 113, where a
    near-recurrence of the carrier enters at Δ = 112."""
    run = trained(vocab_size=40, offset=11, train_length=40, seed=9)
    chance = 1 / 40
    at = {r.length: r for r in evaluate(run.model, run.config, [40, 112, 113, 640], samples=4096)}
    far = at[640]
    assert far.target_mass > 2 * chance
    assert far.accuracy_low <= chance + 0.02  # at chance by the verdict's rule
    assert far.vote_accuracy > 0.7
    text = readouts.readout_text([40, 640], [at[40].accuracy, far.accuracy], [at[40].vote_accuracy, far.vote_accuracy],
                                 [at[40].target_mass, far.target_mass], 4096, chance, 40)
    assert text.startswith("Readout-limited at 640 (16×)")
    assert at[112].accuracy - at[113].accuracy > 0.1
    recurrences = find_near_recurrences(run.model, run.config, 1 << 10)
    assert 112 in [r.offset for r in recurrences]
    lengths = (40, 112, 113)
    caption = readouts.dilution_caption(
        "rope", "softmax", lengths, [at[n].accuracy for n in lengths], [at[n].accuracy for n in lengths], 40,
        run.verdict, accuracy_low=[at[n].accuracy_low for n in lengths], recurrences=recurrences, searched_to=1 << 10)
    assert "where a near-recurrence of the carrier enters at Δ = 112" in caption
    assert "gradual decay, as C6 says" not in caption
    # C1 over every length past training: this run leaves 0.9 at 4× and is at chance from 16× on
    ladder = (40, 80, 160, 320, 640, 1280)
    reports = evaluate(run.model, run.config, ladder, samples=1024)
    curve = accuracy_captions.run_curve("RoPE", run.config, run.verdict, ladder, [r.accuracy for r in reports],
                                        [r.accuracy_low for r in reports])
    text = accuracy_captions.curve_caption(curve)
    assert "It stays near 1 past its training length" not in text
    assert ("leaves it at 160 (4×); from 640 (16×) on it is at chance: this run extrapolates up to 2× only, NOT to "
            "every length measured (C1)") in text

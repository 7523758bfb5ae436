"""The fitted law on real heads (issue 27): a log-n RoPE head and a constructed head, whose p does not fall,
get no law; a RoPE run fitted up to 256, 2,048 and 8,192 tokens gives m_outs that the full fit's interval
with the lengths fitted contains (its answers' interval alone did not: 7.77, 7.20, 7.52, each ±0.04)."""

from __future__ import annotations

import pytest

from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import doublings, evaluate
from lengen_core.analysis.fit import fit_dilution
from lengen_core.analysis.rules import make_rule
from lengen_core.config import RunConfig, with_changes
from lengen_core.measure import measure
from lengen_core.training import train


@pytest.mark.slow  # the default head measured under log-n with its prediction (tens of seconds)
def test_a_log_n_rope_head_whose_p_rises_gets_no_law(rope):
    """Under log-n the default RoPE head's p rises with length (0.82 at 16 to 0.98 at 1,024, measured):
    the old fit said `fitted` with m_out 46.40 [46.40, 46.40] on such a head."""
    L = rope.config.task.train_length
    m = measure(rope, list(doublings(L, 5)), 256, make_rule("log-n"))
    p = [r.target_mass for r in m.reports]
    assert p[-1] > p[0]
    assert (m.fit.status, m.fit.fit) == ("no_dilution", None), m.fit.reason
    assert m.fitted_masses == [None] * len(m.lengths)


@pytest.mark.slow  # the construction, built and measured (ten seconds)
def test_a_constructed_head_with_p_at_one_gets_no_law():
    """The construction keeps p at 0.9998 at every length: the old fit said m_out 35.04 [35.04, 35.04],
    'fits within 0%'."""
    run = train(with_changes(RunConfig(), init="constructed", encoding="learned", steps=0), "cpu")
    m = measure(run, list(doublings(run.config.task.train_length, 4)), 256)
    assert (m.fit.status, m.fit.fit) == ("no_dilution", None), m.fit.reason
    assert "p does not fall" in m.fit.reason


@pytest.mark.slow  # the run of finding 2 trained and evaluated to 8,192 tokens (minutes on a busy machine)
def test_m_outs_interval_contains_the_windowed_fits_of_a_rope_run(trained):
    """V 16, k 3, L_train 32, seed 4, fitted up to 256, 2,048 and 8,192 tokens, as the command line and the
    Dilution page fit it (the prediction's p̂ counts the far keys). The lengths are measured with a seed per
    length, so each window is what `evaluate --lengths` up to it measures."""
    run = trained(train_length=32, seed=4)
    lengths = list(doublings(32, 9))  # 32 … 8,192
    reports = evaluate(run.model, run.config, lengths, samples=256)
    predicted = {p.length: p.target_mass for p in predict(run.model, run.config, lengths)}

    def fitted(top: int):
        kept = [(n, r) for n, r in zip(lengths, reports, strict=True) if n <= top]
        return fit_dilution([n for n, _ in kept], [r.target_mass for _, r in kept],
                            [r.target_mass_sem for _, r in kept], 32, 16, run.verdict, predicted)

    full = fitted(8192)
    assert full.status == "fitted", full.reason
    windows = {top: fitted(top).fit.m_out for top in (256, 2048)}
    law = full.fit
    for top, m_out in windows.items():
        assert law.m_out_lengths_low <= m_out <= law.m_out_lengths_high, (top, m_out, law)
    assert law.m_out_lengths_low <= law.m_out_low <= law.m_out <= law.m_out_high <= law.m_out_lengths_high
    assert law.plain is not None and law.plain.m_out_lengths_low <= law.plain.m_out <= law.plain.m_out_lengths_high

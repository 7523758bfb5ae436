"""One length ladder (issue 41): lengen_core.analysis.evaluate.doublings, and a run's ladder built on it
(lengen.first_visit.ladder), which the Dilution page, Compare, the command line's evaluate and the API read."""

from __future__ import annotations

from lengen.first_visit import FIRST_VISIT_LONGEST, SEQUENCE_MULTIPLE, ladder
from lengen.presets import TRANSFORMER_MULTIPLES
from lengen_core.analysis.evaluate import doublings
from lengen_core.analysis.sequence import MAX_SEQUENCE_LENGTH
from lengen_core.config import RunConfig, with_changes

SINGLE = RunConfig()  # the minimal head on retrieval, L_train 16, k 3
TRANSFORMER = with_changes(RunConfig(), n_layers=2, n_heads=2)


def test_doublings_stop_at_the_longest_asked() -> None:
    assert doublings(16, 5) == (16, 32, 64, 128, 256)
    assert doublings(16, longest=100) == (16, 32, 64)
    assert doublings(16, 3, longest=1 << 30) == (16, 32, 64)
    assert doublings(16, longest=8) == ()


def test_a_single_heads_ladder_is_k_plus_one_then_the_doublings() -> None:
    L, k = SINGLE.task.train_length, SINGLE.task.offset
    assert ladder(SINGLE, 256) == (k + 1, 16, 32, 64, 128, 256)
    assert ladder(SINGLE, 256, offset=False) == doublings(L, longest=256)  # Compare's: the doublings alone
    assert ladder(SINGLE)[-1] == FIRST_VISIT_LONGEST


def test_a_transformers_ladder_stops_at_its_multiple() -> None:
    """Forward passes over every position: the doublings up to SEQUENCE_MULTIPLE × L_train (the Transformer
    page's multiples), no k + 1, whatever the longest asked."""
    assert not TRANSFORMER.single_head
    L = TRANSFORMER.task.train_length
    assert ladder(TRANSFORMER) == ladder(TRANSFORMER, offset=False) == tuple(
        m * L for m in TRANSFORMER_MULTIPLES if m * L <= MAX_SEQUENCE_LENGTH)
    assert ladder(TRANSFORMER)[-1] == SEQUENCE_MULTIPLE * L
    assert ladder(TRANSFORMER, 4 * L) == (L, 2 * L, 4 * L)

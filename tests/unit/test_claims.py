"""lengen_core.claims: one registry of what each encoding and attention is expected to show, which the
captions read instead of testing an encoding's name (docs/science.md §1)."""

from __future__ import annotations

from typing import get_args

from lengen_core.claims import CLAIMS, EXPECTATIONS, expectation
from lengen_core.config import AttentionName, EncodingName


def test_every_pair_the_config_allows_has_an_expectation_and_every_claim_a_phrase():
    assert set(EXPECTATIONS) == {(e, a) for e in get_args(EncodingName) for a in get_args(AttentionName)}
    assert list(CLAIMS) == [f"C{i}" for i in range(1, 11)]
    for expected in EXPECTATIONS.values():
        assert expected.accuracy_claim in CLAIMS


def test_rope_with_softmax_extrapolates_a_learned_table_pins_and_linear_attention_fails():
    rope = expectation("rope", "softmax")
    assert (rope.accuracy, rope.accuracy_claim, rope.trace, rope.carrier, rope.heads) == (
        "extrapolates", "C1", "relative", True, "carries")
    learned = expectation("learned", "softmax")
    assert (learned.accuracy, learned.trace, learned.heads, learned.heads_claim) == ("chance", "pinned", "pins", "C4, C8")
    for encoding in get_args(EncodingName):
        linear = expectation(encoding, "linear")
        assert (linear.accuracy, linear.accuracy_claim, linear.name, linear.carrier) == (
            "chance", "C7", "linear-attention", False)
    for encoding in ("alibi", "sinusoidal", "nope"):  # no claim
        assert expectation(encoding, "softmax").accuracy is None and expectation(encoding, "softmax").trace is None


def test_relative_logits_are_the_encodings_own_property():
    assert {e for e in get_args(EncodingName) if expectation(e, "softmax").relative} == {"rope", "alibi", "nope"}

"""View settings in a link: a repeated run-id list (Compare), an on/off switch, one of a few names."""

from __future__ import annotations

import pytest

from lengen.share import MAX_LINKED_RUNS, view_bool, view_choice, view_run_ids
from lengen_core.config import ConfigError

KNOWN = ["rope-softmax-retrieval-s0-aaaaaaaaaaaa", "rope-softmax-shift-s0-bbbbbbbbbbbb",
         "learned-softmax-retrieval-s0-cccccccccccc"]


def test_repeated_run_ids_come_back_in_order() -> None:
    kept, dropped = view_run_ids({"compare": [KNOWN[2], KNOWN[0]]}, "compare", KNOWN)
    assert kept == (KNOWN[2], KNOWN[0]) and dropped == ()


def test_a_single_value_is_a_list_of_one_and_absence_is_empty() -> None:
    assert view_run_ids({"compare": KNOWN[1]}, "compare", KNOWN) == ((KNOWN[1],), ())
    assert view_run_ids({"other": "x"}, "compare", KNOWN) == ((), ())


def test_a_repeat_is_kept_once() -> None:
    assert view_run_ids({"compare": [KNOWN[0], KNOWN[1], KNOWN[0]]}, "compare", KNOWN)[0] == (KNOWN[0], KNOWN[1])


@pytest.mark.parametrize("bad, words", [
    ("../etc/passwd", "invalid run id '../etc/passwd'"),
    ("Rope", "invalid run id 'Rope'"),
    ("", "has an empty value"),
    ("x" * 300, "300 characters long"),
    ("rope-softmax-retrieval-s9-000000000000", ("names the run 'rope-softmax-retrieval-s9-000000000000', which is "
                                                "not stored here: allowed are the 3 presets and stored runs")),
])
def test_a_bad_value_is_dropped_with_a_message_naming_it_and_the_others_are_kept(bad: str, words: str) -> None:
    kept, dropped = view_run_ids({"compare": [KNOWN[0], bad, KNOWN[1]]}, "compare", KNOWN)
    assert kept == (KNOWN[0], KNOWN[1])
    assert len(dropped) == 1 and words in dropped[0] and "'compare'" in dropped[0]


def test_past_the_limit_runs_are_dropped_by_name() -> None:
    known = [f"rope-softmax-retrieval-s{i}-aaaaaaaaaaaa" for i in range(MAX_LINKED_RUNS + 2)]
    kept, dropped = view_run_ids({"compare": known}, "compare", known)
    assert kept == tuple(known[:MAX_LINKED_RUNS])
    assert len(dropped) == 2 and all(f"more than {MAX_LINKED_RUNS} runs" in m for m in dropped)
    assert known[-1] in dropped[-1]


@pytest.mark.parametrize("value, expected", [("true", True), ("false", False), ("1", True), ("0", False),
                                             ("TRUE", True)])
def test_a_switch_reads_true_or_false(value: str, expected: bool) -> None:
    assert view_bool({"scaled": value}, "scaled", not expected) is expected


def test_a_switch_defaults_when_absent_and_refuses_anything_else() -> None:
    assert view_bool({}, "scaled", True) is True
    with pytest.raises(ConfigError, match="'scaled' must be true or false, got 'yes'"):
        view_bool({"scaled": "yes"}, "scaled", True)
    with pytest.raises(ConfigError, match="given 2 times"):
        view_bool({"scaled": ["true", "false"]}, "scaled", True)


def test_a_choice_must_be_one_offered() -> None:
    heads = ["L0H0", "L0H1", "L1H0", "L1H1"]
    assert view_choice({"head": "L1H0"}, "head", heads, "L0H0") == "L1H0"
    assert view_choice({}, "head", heads, "L0H1") == "L0H1"
    with pytest.raises(ConfigError, match="'head' is 'L7H0': allowed L0H0, L0H1, L1H0, L1H1"):
        view_choice({"head": "L7H0"}, "head", heads, "L0H0")

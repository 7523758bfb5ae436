"""Measurements under inference rules shipped with the presets (lengen.shipped_rules, ui.rules.shipped):
read back they are the measurement computed, every request the lessons' rules steps and the Dilution page's
defaults make of a preset is shipped, the rules view reads them instead of measuring, says on its bar what
it measures otherwise, and what is shipped is what the app computes today (to what another CPU can move:
tests/unit/test_precomputed.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from lengen import budget
from lengen.presets import PRESETS
from lengen.shipped_rules import (
    FORMAT,
    request_key,
    ship_rules,
    shipped_path,
    shipped_requests,
    shipped_rule,
)
from lengen.store import preset_store
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.analysis.rules import parse_rule
from lengen_core.measure import measure
from tests.unit.test_precomputed import ACROSS_CPUS, assert_same_report
from ui.rules import runs as rule_runs
from ui.rules import view as rules_view
from ui.rules.shipped import dilution_request, lesson_requests

ROPE = "rope-softmax-retrieval-s0-bc1b0b2bb01a"  # the default config, trained (a shipped preset)
SHORT = (4, 16, 32, 64, 128)


@pytest.fixture(scope="module")
def presets():
    store = preset_store()
    return {config.run_id(): store.load(config.run_id()) for config in PRESETS.values() if config.single_head}


@pytest.mark.parametrize("label", ["none", "yarn", "ntk"])
def test_a_shipped_measurement_reads_back_as_the_one_computed(presets, tmp_path, label):
    run = presets[ROPE]
    fresh = measure(run, SHORT, 64, parse_rule(label), prices=budget)
    ship_rules(ROPE, [fresh], tmp_path)
    assert shipped_rule(run, label, SHORT, 64, root=tmp_path) == fresh  # every field, the law and horizons too
    assert shipped_rule(run, label, SHORT, 128, root=tmp_path) is None  # other samples: measured, not shipped
    assert shipped_rule(run, label, SHORT[:-1], 64, root=tmp_path) is None  # other lengths
    assert shipped_rule(run, label, SHORT, 64, seed=1, root=tmp_path) is None  # another seed
    assert shipped_rule(run, "log-n", SHORT, 64, root=tmp_path) is None  # another rule


def test_a_file_of_another_run_or_format_is_not_read(presets, tmp_path):
    run = presets[ROPE]
    ship_rules(ROPE, [measure(run, SHORT, 64, parse_rule("yarn"))], tmp_path)
    other = next(r for run_id, r in presets.items() if run_id != ROPE)
    shipped_path(ROPE, tmp_path).rename(shipped_path(other.run_id, tmp_path))  # a file under another run's name
    assert shipped_rule(other, "yarn", SHORT, 64, root=tmp_path) is None
    ship_rules(ROPE, [measure(run, SHORT, 64, parse_rule("yarn"))], tmp_path)
    data = shipped_requests(ROPE, tmp_path)
    data[request_key("yarn", SHORT, 64)]["format"] = FORMAT + 1
    shipped_path(ROPE, tmp_path).write_text(json.dumps(data))
    assert shipped_rule(run, "yarn", SHORT, 64, root=tmp_path) is None
    with pytest.raises(ValueError, match="is not one of"):
        ship_rules(other.run_id, [measure(run, SHORT, 64, parse_rule("yarn"))], tmp_path)


def _requests(presets) -> dict[str, list]:
    found = lesson_requests(presets)
    for run_id, run in presets.items():
        found.setdefault(run_id, []).append(dilution_request(run))
    return found


def test_every_lesson_step_and_dilution_default_is_shipped(presets):
    requests = _requests(presets)
    assert len(requests[ROPE]) >= 4  # the long-context lesson's three steps and the Dilution page's defaults
    for run_id, asked in requests.items():
        shipped = shipped_requests(run_id)
        missing = [request_key(label, lengths, samples) for labels, lengths, samples in asked for label in labels
                   if request_key(label, lengths, samples) not in shipped]
        assert not missing, f"{run_id}: run python -m scripts.build_presets --rules ({missing[:3]} not shipped)"
        for labels, lengths, samples in asked:
            for label in labels:
                assert shipped_rule(presets[run_id], label, lengths, samples) is not None, (run_id, label)


def test_the_rules_view_reads_a_shipped_request_without_measuring(presets, monkeypatch):
    labels, lengths, samples = dilution_request(presets[ROPE])
    monkeypatch.setattr(rule_runs, "ruled_measurement", lambda *a, **k: pytest.fail("measured, not read"))
    monkeypatch.setattr(rules_view, "Progress", _Recorder)
    measured, table, _ = rules_view.under_rules(presets[ROPE], list(labels), lengths, samples)
    assert list(measured) == list(labels) and set(table["rule"]) == set(labels)
    assert measured["log-n"][1] == shipped_rule(presets[ROPE], "log-n", lengths, samples)


class _Recorder:
    """A stand-in for ui.runs.Progress that keeps what the bar would say."""

    said: list[str] = []

    def __init__(self, what: str, runs: int = 1, unit: str = "run") -> None:
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def doing(self, what: str) -> None:
        _Recorder.said.append(what)

    def at(self, *args) -> None:
        pass

    def next_run(self) -> None:
        _Recorder.said.append("next")


def test_the_rules_view_says_what_it_measures_on_its_bar(presets, monkeypatch):
    _Recorder.said = []
    monkeypatch.setattr(rules_view, "Progress", _Recorder)
    rules_view.under_rules(presets[ROPE], ["none", "pi"], (4, 16, 32, 64), 32)  # nothing shipped for this request
    assert _Recorder.said[-3:] == ["evaluating and predicting 4 lengths under pi",
                                   "searching the predicted horizon under pi (up to 64)", "next"]
    ruled = rule_runs.ruled_measurement(ROPE, "pi", (4, 16, 32, 64), 32, _Recorder("test"))  # cached parts
    one_call = measure(presets[ROPE], (4, 16, 32, 64), 32, parse_rule("pi"), prices=budget)
    assert _timeless(ruled) == _timeless(one_call)  # every number; only the evaluation's wall time differs


def _timeless(m):
    return dataclasses.replace(m, reports=tuple(dataclasses.replace(r, seconds=0.0) for r in m.reports))


@pytest.mark.slow  # every shipped request re-measured in part (a minute or more); quick: the read-back tests above
def test_the_shipped_rule_measurements_are_the_computed_ones(presets):
    for run_id, run in presets.items():
        for data in shipped_requests(run_id).values():
            rule, lengths, samples = parse_rule(data["rule"]), tuple(data["lengths"]), data["samples"]
            shipped = shipped_rule(run, rule.label, lengths, samples)
            ends = [lengths.index(n) for n in (lengths[1], lengths[-1])]
            for i in ends:
                assert data["reports"][i]["rule"] == rule.label
                fresh = evaluate(run.model, run.config, [lengths[i]], samples=samples, rule=rule)[0]
                assert_same_report({**data["reports"][i], "rule": "none"}, {**dataclasses.asdict(fresh), "rule": "none"})
            fresh = predict(run.model, run.config, [lengths[i] for i in ends], rule=rule)
            for i, prediction in zip(ends, fresh, strict=True):
                assert dataclasses.asdict(shipped.predictions[i]) == pytest.approx(
                    dataclasses.asdict(prediction), rel=ACROSS_CPUS, abs=1e-6), (run_id, rule.label)
            horizon = shipped.predicted_horizon  # ≥ 0.9 at it, below at its `below`, predicted afresh
            around = [n for n in (horizon.length, horizon.below) if n is not None]
            accuracies = [p.accuracy for p in predict(run.model, run.config, around, rule=rule)]
            if horizon.length is not None:
                assert accuracies[0] >= horizon.threshold, (run_id, rule.label, horizon)
            if horizon.below is not None:
                assert accuracies[-1] < horizon.threshold, (run_id, rule.label, horizon)


def test_a_shipped_request_is_not_priced(presets, monkeypatch):
    labels, lengths, samples = dilution_request(presets[ROPE])
    monkeypatch.setattr(rule_runs, "check_measurement", lambda *a, **k: pytest.fail("priced, though shipped"))
    rule_runs.price(ROPE, labels[1:], lengths, samples)
    with pytest.raises(pytest.fail.Exception, match="priced"):  # a request not shipped is priced as before
        rule_runs.price(ROPE, ["ntk"], lengths[:-1], samples)

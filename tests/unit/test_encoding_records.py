"""One record per encoding (issue 41, lengen_core.claims.ENCODING_RECORDS): its name, display name, colour, dash
and claims. Adding an encoding is its class and its record: the registry and the records name the same
encodings, and every place that shows an encoding reads the record, so one edit to it changes them all."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import get_args

import pandas as pd
import pytest

from lengen_core.claims import DELAY_EXPECTATIONS, ENCODING_RECORDS, EncodingRecord, encoding_record, expectation
from lengen_core.config import EncodingName, RunConfig, with_changes
from lengen_core.models.encodings import ENCODING_CLASSES, ENCODINGS

PLOTLY_DASHES = {"solid", "dot", "dash", "longdash", "dashdot", "longdashdot"}


def test_every_encoding_class_has_exactly_one_record_and_every_record_a_class():
    names = list(get_args(EncodingName))
    assert list(ENCODING_RECORDS) == names  # the legends list them in the config's order
    assert set(ENCODING_CLASSES) == set(ENCODINGS) == set(names)
    assert all(record.name == name for name, record in ENCODING_RECORDS.items())
    classes = [ENCODING_CLASSES[name] for name in ENCODING_RECORDS]
    assert len(set(classes)) == len(classes)  # one class, one record
    with pytest.raises(KeyError):
        encoding_record("xpos")


def test_records_tell_the_encodings_apart_on_every_chart():
    records = list(ENCODING_RECORDS.values())
    for field in ("display", "colour", "dash"):
        values = [getattr(record, field) for record in records]
        assert len(set(values)) == len(values), f"two encodings share a {field}: {values}"
    assert all(re.fullmatch(r"#[0-9a-f]{6}", record.colour) for record in records)
    assert {record.dash for record in records} <= PLOTLY_DASHES


def test_the_names_colours_and_dashes_are_those_shown_before_the_record():
    shown = {name: (record.display, record.colour, record.dash) for name, record in ENCODING_RECORDS.items()}
    assert shown == {"rope": ("RoPE", "#1f77b4", "solid"), "learned": ("learned", "#d62728", "dot"),
                     "sinusoidal": ("sinusoidal", "#9467bd", "dash"), "alibi": ("ALiBi", "#2ca02c", "dashdot"),
                     "nope": ("NoPE", "#7f7f7f", "longdash")}


def test_the_claims_are_read_from_the_record():
    for name, record in ENCODING_RECORDS.items():
        expected = expectation(name, "softmax")
        assert (expected.name, expected.accuracy, expected.trace, expected.carrier, expected.heads) == (
            record.run_name, record.accuracy, record.trace, record.carrier, record.heads)
        assert DELAY_EXPECTATIONS.get(("delay-copy", name)) == record.delay_copy
    assert expectation("learned", "softmax").name == "learned-position"


@pytest.fixture
def changed_nope(monkeypatch) -> EncodingRecord:
    """NoPE's record with a new display name, colour and dash: what a reader shows must follow."""
    record = replace(ENCODING_RECORDS["nope"], display="No positions", colour="#123456", dash="longdashdot")
    monkeypatch.setitem(ENCODING_RECORDS, "nope", record)
    return record


def test_a_label_reads_the_record(changed_nope):
    from ui.runs import _named

    assert _named(with_changes(RunConfig(), encoding="nope"), "encoding") == "No positions"
    assert _named(with_changes(RunConfig(), encoding="rope"), "encoding") == "RoPE"


def test_the_sweep_colours_read_the_record(changed_nope):
    from ui.sweep_panels import encoding_colour

    scale = encoding_colour(["nope", "rope"]).to_dict()["scale"]
    assert scale == {"domain": ["rope", "nope"], "range": ["#1f77b4", "#123456"]}


def test_the_delay_lines_read_the_record(changed_nope):
    from ui.delays import diversity_figure

    table = pd.DataFrame([{"encoding": encoding, "seed": 0, "delays": "2,3", "delay_count": 2, "learned": True,
                           "mean_seen": 1.0, "mean_near_unseen": 0.5, "mean_unseen": 0.2} for encoding in ("rope", "nope")])
    dashes = {trace.legendgroup: trace.line.dash for trace in diversity_figure(table).data if trace.mode == "lines+markers"}
    assert dashes == {"rope": "solid", "nope": "longdashdot"}

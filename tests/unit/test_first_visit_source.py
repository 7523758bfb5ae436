"""A page's stored numbers describe the weights it loads: `ui.runs.load_run` reads the person's store before
the presets, so `first_visit_data` must too. A run retrained under a preset's id (the default config with
`--retrain`) was shown with the preset's shipped numbers (0.566 on the page against 0.574 measured from the
loaded weights, at one length)."""

from __future__ import annotations

import pytest

from lengen.presets import PRESETS, precomputed
from lengen.store import RunStore, preset_store
from ui import runs


@pytest.fixture
def own_store(tmp_path, monkeypatch) -> RunStore:
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    store = RunStore()
    assert store.root.is_relative_to(tmp_path)
    return store


def test_a_run_retrained_under_a_presets_id_shows_its_own_numbers(own_store):
    run_id = PRESETS["RoPE"].run_id()
    assert precomputed(run_id), "the RoPE preset ships its first-visit numbers"
    run = preset_store().load(run_id)
    own = {"evaluations": {"256": {}}, "marker": "the person's own run"}
    own_store.save(run, first_visit=own)
    assert runs.first_visit_data(run_id) == own
    assert runs.load_run(run_id).run_id == run_id


def test_a_run_retrained_under_a_presets_id_without_numbers_is_measured_not_given_the_presets(own_store):
    run_id = PRESETS["RoPE"].run_id()
    own_store.save(preset_store().load(run_id))
    assert runs.first_visit_data(run_id) == {}


def test_a_preset_not_in_the_persons_store_reads_what_ships(own_store):
    run_id = PRESETS["RoPE"].run_id()
    assert runs.first_visit_data(run_id) == precomputed(run_id)

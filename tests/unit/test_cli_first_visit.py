"""A run trained at the command line, `train` or `continue`, is stored with its first-visit numbers, as one trained
in the app is (lengen.first_visit.save_run, the one function every training stores a run through):
the app then opens it without measuring it. `measure` reads them back and gives the numbers it computes itself.
A learned table of 128 rows keeps the default request short (lengths up to 128): a fraction of a second."""

from __future__ import annotations

import pytest

from lengen.first_visit import FIRST_VISIT_SAMPLES, MEASURE_ENV, from_dict, request_lengths
from lengen.store import PENDING_FILE, RunStore
from lengen_core import measure as measure_module
from lengen_core.measure import measure
from tests.helpers.cli import ok_json, run_cli
from tests.helpers.records import same

SMALL = ("--vocab", "8", "--train-length", "8", "--offset", "3", "--encoding", "learned", "--max-positions", "128",
         "--steps", "300", "--device", "cpu")


@pytest.fixture(autouse=True)
def measured_home(tmp_path, monkeypatch):
    """An empty store of its own, with measuring on save turned on (the suite turns it off)."""
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    monkeypatch.setenv(MEASURE_ENV, "1")


def test_a_run_trained_at_the_command_line_is_stored_with_its_numbers_and_measure_reads_them_back(monkeypatch):
    run_id = ok_json("train", *SMALL, "--json")["run_id"]  # --json: stderr silent, so the CLI said nothing else
    store = RunStore()
    stored = from_dict(store.first_visit(run_id))
    assert stored is not None and store.first_visit(run_id)["carrier"] is not None
    assert not store.first_visit_pending(run_id) and not (store.run_dir(run_id) / PENDING_FILE).exists()
    run = store.load(run_id)
    lengths = request_lengths(run)
    fresh = measure(run, lengths, FIRST_VISIT_SAMPLES)  # computed here, from the stored weights

    def refuse(*args, **kwargs):
        raise AssertionError("computed again what was stored")

    for name in ("evaluate", "predict_at", "predicted_horizon", "fit_dilution"):
        monkeypatch.setattr(measure_module, name, refuse)
    read = measure(run, lengths, FIRST_VISIT_SAMPLES, shipped=stored)  # the app's first visit: nothing computed
    assert all(same(a, b) for a, b in zip(read.reports, fresh.reports, strict=True))
    assert all(same(a, b) for a, b in zip(read.predictions, fresh.predictions, strict=True))
    assert read.predicted_horizon == fresh.predicted_horizon and read.fit == fresh.fit


@pytest.mark.slow  # three trainings and their measurements; quick representative: the test above
def test_continue_and_retrain_store_the_numbers_of_the_weights_they_saved():
    first = ok_json("train", *SMALL, "--json")["run_id"]
    store = RunStore()
    continued = ok_json("continue", first, "--steps", "20", "--json")["run_id"]
    assert continued != first and from_dict(store.first_visit(continued)) is not None
    again = ok_json("train", *SMALL, "--retrain", "--json")["run_id"]  # a new directory, written in its place
    assert again == first and not store.first_visit_pending(first)
    assert from_dict(store.first_visit(first)) is not None  # the retrained run measured too, not left without


def test_the_command_line_says_it_measures_after_training():
    shown = run_cli("train", *SMALL)
    assert shown.code == 0, shown.stderr
    said = [line for line in shown.stderr.replace("\r", "\n").splitlines() if "measuring it at" in line]
    assert said and f"{FIRST_VISIT_SAMPLES} sequences" in said[0]

"""A run trained in the pool is saved and reported done, then measured at the pages' default request, and
its stored entry gets those numbers (lengen.first_visit): they are what `measure` computes for that request,
`measure` reads them back instead of computing, and Dilution's request and Compare's give one set of
numbers. A learned table of 128 rows keeps the request short (lengths up to 128), so the measurement
is a fraction of a second; the child-process path is the slow test."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest

from lengen.first_visit import (
    FIRST_VISIT_CARRIER_SEARCH,
    FIRST_VISIT_SAMPLES,
    MEASURE_ENV,
    carrier_from_dict,
    first_visit,
    first_visit_seconds,
    from_dict,
    request_lengths,
    to_dict,
)
from lengen.jobs import TrainingPool
from lengen.store import FIRST_VISIT_FILE, PENDING_FILE, RunStore
from lengen.sweep import SweepGrid, cell_config, run_cell, sweep_seconds
from lengen.training_process import save_run
from lengen_core import measure as measure_module
from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.evaluate import doublings
from lengen_core.config import RunConfig, with_changes
from lengen_core.measure import Shipped, measure
from lengen_core.training import train
from tests.helpers.records import same

SMALL = with_changes(RunConfig(), vocab_size=8, train_length=8, offset=3, encoding="learned", max_positions=128,
                     steps=300)


def done_then_measured(pool: TrainingPool, ticket: int, store: RunStore, seconds: float) -> tuple[str, bool]:
    """Wait for the job to be done, then for its numbers; the run id, and whether they were still being measured
    (`first_visit_pending`, numbers absent) when the job was first seen done."""
    deadline = time.monotonic() + seconds
    while (status := pool.status(ticket)).state in ("queued", "running"):
        assert time.monotonic() < deadline, "the training did not end"
        time.sleep(0.002)
    assert status.state == "done", status.error
    run_id = status.stored_run_id
    pending_when_done = store.first_visit_pending(run_id) and store.first_visit(run_id) is None
    while store.first_visit_pending(run_id):
        assert time.monotonic() < deadline, "the numbers were not added"
        time.sleep(0.01)
    return run_id, pending_when_done


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store with one run of SMALL trained by the pool (worker threads), measured once saved."""
    store = RunStore(tmp_path_factory.mktemp("first-visit-store"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MEASURE_ENV, "1")
        pool = TrainingPool(store, max_concurrent=1, device="cpu")
        try:
            run_id, pending_when_done = done_then_measured(pool, pool.submit(SMALL), store, 240)
        finally:
            pool.close()
    return store, store.load(run_id), pending_when_done


def test_a_run_trained_in_the_pool_is_stored_with_what_measure_computes_at_the_default_request(trained):
    store, run, _ = trained
    stored = from_dict(store.first_visit(run.run_id))
    assert stored is not None, f"{FIRST_VISIT_FILE} missing"
    lengths = request_lengths(run)
    assert lengths == (4, 8, 16, 32, 64, 128)  # k + 1, then L_train doubled to the end of the table
    fresh = measure(run, lengths, FIRST_VISIT_SAMPLES)  # computed here, from the stored weights
    assert set(stored.evaluations) == {FIRST_VISIT_SAMPLES}
    assert sorted(stored.evaluations[FIRST_VISIT_SAMPLES]) == list(lengths)
    assert all(same(stored.evaluations[FIRST_VISIT_SAMPLES][n], r) for n, r in zip(lengths, fresh.reports, strict=True))
    assert sorted(stored.predictions) == sorted({8, *lengths})
    assert all(same(stored.predictions[p.length], p) for p in fresh.predictions)
    assert stored.horizon == fresh.predicted_horizon and stored.horizon.ceiling == 128
    assert stored.fit == fresh.fit and (stored.fit_samples, stored.fit_lengths) == (256, (8, 16, 32, 64, 128))


def test_the_stored_carrier_is_the_one_extracted_at_the_default_search(trained):
    store, run, _ = trained
    data = store.first_visit(run.run_id)["carrier"]
    fresh = extract_carrier(run.model, run.config, search_length=FIRST_VISIT_CARRIER_SEARCH)
    stored = carrier_from_dict(json.loads(json.dumps(data)), FIRST_VISIT_CARRIER_SEARCH)
    assert stored.source == fresh.source == "measured" and not data["searched"]
    for name in ("offsets", "values", "frequencies", "amplitudes", "singular_values"):
        assert np.array_equal(getattr(stored, name), getattr(fresh, name)), name
    assert (stored.metrics, stored.baseline, stored.near_recurrences) == (fresh.metrics, fresh.baseline,
                                                                         fresh.near_recurrences)
    assert stored.baseline_range == fresh.baseline_range and stored.baseline_range.seeds >= 2
    # a carrier stored before its baseline range (sampled metrics): read without error, extracted again
    assert carrier_from_dict({k: v for k, v in data.items() if k != "baseline_range"}, FIRST_VISIT_CARRIER_SEARCH) is None
    assert carrier_from_dict(data, 1 << 10) is not None  # a measured carrier has no search: it answers every one
    assert carrier_from_dict({**data, "searched": True}, 1 << 10) is None  # an analytic one only its own
    assert carrier_from_dict({**data, "values": "x"}, FIRST_VISIT_CARRIER_SEARCH) is None


def test_measure_reads_the_stored_numbers_and_computes_none_of_them(trained, monkeypatch):
    store, run, _ = trained
    stored = from_dict(store.first_visit(run.run_id))
    fresh = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES)

    def refuse(*args, **kwargs):
        raise AssertionError("computed again what was stored")

    for name in ("evaluate", "predict_at", "predicted_horizon", "fit_dilution"):
        monkeypatch.setattr(measure_module, name, refuse)
    read = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES, shipped=stored)
    assert all(same(a, b) for a, b in zip(read.reports, fresh.reports, strict=True))
    assert read.fit == fresh.fit and read.predicted_horizon == fresh.predicted_horizon
    assert read.measured_horizon == fresh.measured_horizon


def test_dilution_and_compare_requests_give_one_set_of_numbers(trained):
    """Compare asks the doublings of the training length (no k + 1) at the same samples: the law, the horizons
    and every shared length's figures are Dilution's."""
    store, run, _ = trained
    stored = from_dict(store.first_visit(run.run_id))
    dilution = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES, shipped=stored)
    compare = measure(run, [n for n in doublings(8) if n <= 128], FIRST_VISIT_SAMPLES, shipped=stored)
    assert compare.fit == dilution.fit
    assert compare.measured_horizon == dilution.measured_horizon
    assert compare.predicted_horizon == dilution.predicted_horizon
    assert compare.reports == dilution.reports[1:]  # the same records, k + 1 = 4 aside


def assert_close_fit(got, want, rel: float = 1e-9) -> None:
    """Two fits' every number equal within `rel` (dataclasses and tuples compared field by field)."""
    if dataclasses.is_dataclass(want):
        assert type(got) is type(want)
        for field in dataclasses.fields(want):
            assert_close_fit(getattr(got, field.name), getattr(want, field.name), rel)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert_close_fit(a, b, rel)
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=rel, abs_tol=1e-12), (got, want)
    else:
        assert got == want


def test_a_preset_that_learned_the_law_shows_one_m_out_on_both_requests(monkeypatch):
    """The RoPE preset (a law) from its shipped numbers, the same form a trained run is stored in: its law
    is read back for both requests, and is the one fitted afresh to them."""
    from lengen.presets import precomputed, preset_ids
    from lengen.store import preset_store

    run_id = preset_ids()["RoPE"]
    run, shipped = preset_store().load(run_id), from_dict(precomputed(run_id))
    dilution = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES, shipped=shipped)
    compare = measure(run, [n for n in doublings(16) if n <= 1 << 16], FIRST_VISIT_SAMPLES, shipped=shipped)
    assert dilution.fit.fit is not None  # fitted where p > 2/V: 16 … 4,096 on this preset
    assert compare.fit == dilution.fit
    assert shipped.fit == dilution.fit  # read back, not fitted again (rebuilt presets ship their law)
    refitted = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES,
                       shipped=dataclasses.replace(shipped, fit=None))
    # fitted afresh on this CPU: the same law up to the last bits of the float kernels (the presets were built
    # on another x86 CPU: max_relative_error 0.02959351728387838 there, ...38 here)
    assert_close_fit(refitted.fit, dilution.fit)
    assert compare.measured_horizon == dilution.measured_horizon
    assert compare.predicted_horizon == dilution.predicted_horizon


def test_the_pool_reports_the_run_done_before_its_numbers_are_in(trained):
    store, run, pending_when_done = trained
    assert pending_when_done  # done was said while the store still said the numbers were coming
    assert not store.first_visit_pending(run.run_id) and store.first_visit(run.run_id) is not None


def test_save_run_saves_and_says_so_before_it_measures_and_only_when_asked(tmp_path, monkeypatch):
    run = train(with_changes(SMALL, steps=5, seed=7), "cpu")
    store = RunStore(tmp_path / "on")
    monkeypatch.setenv(MEASURE_ENV, "1")
    calls = []

    def saved(run_id: str) -> None:
        calls.append((store.load(run_id).run_id, store.first_visit_pending(run_id), store.first_visit(run_id)))

    run_id = save_run(store, run, saved)
    assert calls == [(run_id, True, None)]  # stored whole and said done at once; its numbers marked as coming
    assert from_dict(store.first_visit(run_id)) is not None and not store.first_visit_pending(run_id)
    assert {f.name for f in store.run_dir(run_id).iterdir()} == {"weights.safetensors", "config.json", "metrics.json",
                                                                 FIRST_VISIT_FILE}  # no mark, no temp file left
    assert store.size()[run_id] > (store.run_dir(run_id) / "weights.safetensors").stat().st_size + 1000  # in the quota
    monkeypatch.setenv(MEASURE_ENV, "0")
    off = RunStore(tmp_path / "off")
    calls.clear()
    save_run(off, run, lambda run_id: calls.append(off.first_visit_pending(run_id)))
    assert calls == [False] and off.first_visit(run_id) is None  # measured on its first visit instead
    transformer = train(with_changes(RunConfig(), vocab_size=8, train_length=8, offset=3, n_layers=1, n_heads=2,
                                     d_model=32, steps=3), "cpu")
    monkeypatch.setenv(MEASURE_ENV, "1")
    assert first_visit(transformer) is None  # no closed form: its pages measure it
    calls.clear()
    save_run(store, transformer, lambda run_id: calls.append(store.first_visit_pending(run_id)))
    assert calls == [False] and store.first_visit(transformer.run_id) is None


def test_a_sweeps_cell_stores_the_run_it_trains_with_its_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv(MEASURE_ENV, "1")
    config = with_changes(SMALL, steps=20, seed=9)
    record = run_cell(str(tmp_path), config.to_dict(), [8, 16], 64, limited=False)
    stored = from_dict(RunStore(tmp_path).first_visit(record["run_id"]))
    assert not record["reused"] and stored is not None
    assert sorted(stored.evaluations[FIRST_VISIT_SAMPLES]) == list(request_lengths(RunStore(tmp_path).load(config.run_id())))


def test_a_sweeps_estimate_counts_the_measurement_of_every_cell_it_may_train(monkeypatch):
    grid = SweepGrid(encodings=("rope", "learned"), seeds=(0, 1), lengths=(16, 64), samples=64)
    monkeypatch.setenv(MEASURE_ENV, "0")
    without = sweep_seconds(grid)
    monkeypatch.setenv(MEASURE_ENV, "1")
    each = [first_visit_seconds(cell_config(grid, cell)) for cell in grid.cells()]
    assert all(seconds > 0 for seconds in each) and sweep_seconds(grid) == pytest.approx(without + sum(each))
    transformer = with_changes(RunConfig(), n_layers=1, n_heads=2, d_model=32)
    assert first_visit_seconds(transformer) == 0.0  # no closed form: measured on its first visit, not here


def test_numbers_are_added_only_to_the_run_they_were_measured_for_and_a_dead_measurer_is_not_waited_for(tmp_path):
    run = train(with_changes(SMALL, steps=5, seed=8), "cpu")
    store = RunStore(tmp_path)
    store.save(run, pending="first")
    assert store.first_visit_pending(run.run_id)
    store.replace(run, pending="second")  # retrained meanwhile: the first measurement is of other weights
    assert not store.add_first_visit(run.run_id, "first", {"format": 1}) and store.first_visit(run.run_id) is None
    assert store.add_first_visit(run.run_id, "second", {"format": 1}) and store.first_visit(run.run_id) == {"format": 1}
    assert not store.first_visit_pending(run.run_id) and not store.add_first_visit(run.run_id, "second", {})
    store.replace(run, pending="third")
    marker = store.run_dir(run.run_id) / PENDING_FILE
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "pid": dead.pid}))
    assert not store.first_visit_pending(run.run_id)  # killed while measuring: the pages measure it themselves
    marker.write_text("{not json")
    assert not store.first_visit_pending(run.run_id)


def test_the_stored_form_reads_back_and_a_damaged_or_foreign_file_reads_as_nothing(trained):
    store, run, _ = trained
    data = store.first_visit(run.run_id)
    again = from_dict(json.loads(json.dumps(to_dict(from_dict(data)))))
    assert again == from_dict(data) or to_dict(again) == to_dict(from_dict(data))
    assert from_dict({**data, "format": 99}) is None
    assert from_dict({"evaluations": {"256": {"8": {"length": 8}}}}) is None  # fields missing
    assert from_dict(None) is None and from_dict({}) is None
    assert from_dict(to_dict(Shipped())) == Shipped()
    path = store.run_dir(run.run_id) / FIRST_VISIT_FILE
    saved = path.read_text()
    try:
        path.write_text("{not json")
        assert store.first_visit(run.run_id) is None
    finally:
        path.write_text(saved)


@pytest.mark.slow
def test_a_training_in_a_child_process_is_reported_done_then_measured_there(tmp_path, monkeypatch):
    monkeypatch.setenv(MEASURE_ENV, "1")  # the child inherits it
    store = RunStore(tmp_path)
    pool = TrainingPool(store, max_concurrent=1, device="cpu", isolate=True)
    config = with_changes(SMALL, seed=3)
    try:
        run_id, pending_when_done = done_then_measured(pool, pool.submit(config), store, 300)
    finally:
        pool.close()
    assert pending_when_done  # the child said done, then measured
    run = store.load(run_id)
    stored = from_dict(store.first_visit(run.run_id))
    fresh = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES)
    assert all(same(stored.evaluations[FIRST_VISIT_SAMPLES][r.length], r) for r in fresh.reports)
    assert stored.horizon == fresh.predicted_horizon

"""A run saved with its first-visit numbers (lengen.first_visit) opens on Dilution and Compare
without one evaluation, prediction or horizon search: the pages read what the training measured. A run
saved without them (as before) is measured on its first visit, which shows that the count can see it. A run
opened while its numbers are still being measured (a training reports it done first) waits for them.
Each page says what it measured, and that Dilution's and Compare's defaults are one request."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.first_visit import MEASURE_ENV, first_visit_data
from lengen.presets import preset_ids
from lengen.store import RunStore
from lengen.training_process import save_run
from lengen_core import measure as measure_module
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from ui import runs as ui_runs

APP = str(Path(__file__).resolve().parents[2] / "app.py")
# A learned table of 128 rows: the default request stops at 128, so measuring on save is quick.
SMALL = with_changes(RunConfig(), vocab_size=8, train_length=8, offset=3, encoding="learned", max_positions=128,
                     steps=300)


@pytest.fixture(scope="module")
def runs() -> dict[str, str]:
    """Two runs in the session's store (LENGEN_HOME): one saved with its numbers, one without."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MEASURE_ENV, "1")
        measured = save_run(RunStore(), train(with_changes(SMALL, seed=11), "cpu"))
        patch.setenv(MEASURE_ENV, "0")
        bare = save_run(RunStore(), train(with_changes(SMALL, seed=12), "cpu"))
    assert RunStore().first_visit(measured) is not None and RunStore().first_visit(bare) is None
    return {"measured": measured, "bare": bare}


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every evaluation, prediction, horizon search and fit `measure` (or the length-by-length cache) starts,
    and every carrier extraction."""
    calls: list[str] = []

    def counting(name, original):
        def counted(*args, **kwargs):
            calls.append(name)
            return original(*args, **kwargs)
        return counted

    for name in ("evaluate", "predict_at", "predicted_horizon", "fit_dilution"):
        monkeypatch.setattr(measure_module, name, counting(name, getattr(measure_module, name)))
    monkeypatch.setattr(ui_runs, "evaluate", counting("evaluate", ui_runs.evaluate))
    monkeypatch.setattr(ui_runs, "extract_carrier", counting("extract_carrier", ui_runs.extract_carrier))
    return calls


def open_page(page: str, params: dict[str, str | list[str]]) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page(page)
    app.query_params.clear()
    app.query_params.update(params)
    return app.run()


def captions(app: AppTest) -> str:
    return " ".join(c.value for c in app.caption)


def test_dilution_and_compare_read_a_fresh_runs_stored_numbers_and_compute_none(runs, computed):
    run_id = runs["measured"]
    dilution = open_page("pages/dilution.py", {"run": run_id})
    assert not dilution.exception, [e.value for e in dilution.exception]
    assert computed == [], computed
    text = captions(dilution)
    assert "Measured at 6 lengths, 4 to 128, 256 sequences each" in text
    assert "the default request" in text and "measured once before anyone opened a page" in text
    m_out = text.split("**m_out: ", 1)[1].split(".**", 1)[0]  # the law's figure, with what it was fitted to, or why none

    carrier = open_page("pages/carrier.py", {"run": run_id})
    assert not carrier.exception, [e.value for e in carrier.exception]
    assert computed == [], computed

    compare = open_page("pages/compare.py", {"compare": [run_id]})
    assert not compare.exception, [e.value for e in compare.exception]
    assert computed == [], computed
    assert "Measured at 5 lengths, 8 to 128, 256 sequences each" in captions(compare)
    numbers = compare.table[0].value  # a row per quantity (the index), a column per run
    assert numbers.loc["m_out (95%)"].iloc[0] == m_out  # one set of numbers: Compare's m_out is Dilution's


def test_a_preset_with_a_law_shows_one_m_out_on_dilution_and_compare(computed):
    rope = preset_ids()["RoPE"]
    dilution = open_page("pages/dilution.py", {"run": rope})
    compare = open_page("pages/compare.py", {"compare": [rope]})
    assert not dilution.exception and not compare.exception
    assert computed == [], computed
    m_out = captions(dilution).split("**m_out: ", 1)[1].split(".**", 1)[0]
    assert m_out[0].isdigit() and "fitted 16–" in m_out and "256 samples" in m_out  # a law, and what it was fitted to
    assert compare.table[0].value.loc["m_out (95%)"].iloc[0] == m_out


@pytest.fixture(scope="module")
def pending() -> tuple[str, str, dict]:
    """A run stored as a training stores it, before its numbers are in (marked pending by this live process),
    with those numbers computed here beforehand (run id, token, numbers)."""
    run = train(with_changes(SMALL, seed=13), "cpu")
    numbers = first_visit_data(run)
    RunStore().save(run, pending="measuring-here")
    assert RunStore().first_visit_pending(run.run_id)
    return run.run_id, "measuring-here", numbers


def test_a_run_opened_while_its_numbers_are_measured_waits_for_them_and_computes_none(pending, computed):
    run_id, token, numbers = pending
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/dilution.py")
    app.query_params.update({"run": run_id})
    assert RunStore().first_visit_pending(run_id)
    started = time.monotonic()
    threading.Timer(1.0, RunStore().add_first_visit, (run_id, token, numbers)).start()  # as the training's process
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert time.monotonic() - started >= 1.0 and computed == [], computed  # it waited, then read them
    assert "measured once before anyone opened a page" in captions(app)


def test_a_run_stored_without_them_is_measured_on_its_first_visit(runs, computed):
    app = open_page("pages/dilution.py", {"run": runs["bare"]})
    assert not app.exception, [e.value for e in app.exception]
    assert "evaluate" in computed and "predict_at" in computed  # the count sees the work when there is some
    open_page("pages/carrier.py", {"run": runs["bare"]})
    assert "extract_carrier" in computed
    assert "the default request" in captions(app) and "measured once" not in captions(app)


def test_another_request_says_why_its_numbers_differ(runs):
    app = open_page("pages/dilution.py", {"run": runs["measured"], "samples": "128"})
    assert not app.exception, [e.value for e in app.exception]
    assert "not the default request" in captions(app) and "differs from those defaults here by design" in captions(app)

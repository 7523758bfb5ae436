"""The served pages under the server's bounds: a poisoned run in the store breaks no page, an
analysis over budget is a warning where its chart would be, and the Train page shows the estimate
of the config in its form against the budgets before anyone presses Train."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from lengen.budget import MEMORY_ENV, TRAIN_SECONDS_ENV
from lengen.presets import preset_ids
from lengen.store import METRICS_FILE, RunStore, default_root
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGES = ["pages/start.py", "pages/train.py", "pages/attention.py", "pages/carrier.py", "pages/dilution.py",
         "pages/compare.py", "pages/transformer.py", "pages/theory.py"]


def shown(markdown: str) -> str:
    """The text a reader sees: messages escape markdown (ui.state.plain)."""
    return markdown.replace("\\", "")


@pytest.fixture(scope="module")
def poisoned() -> str:
    """A run in the session's store whose metrics.json says steps = 1e400 (past any float)."""
    run = train(with_changes(RunConfig(), steps=3, seed=4_242), "cpu")
    directory = RunStore().save(run)
    metrics = json.loads((directory / METRICS_FILE).read_text())
    (directory / METRICS_FILE).write_text(json.dumps(metrics).replace(f'"steps": {metrics["steps"]}', '"steps": 1e400'))
    yield run.run_id
    RunStore().delete(run.run_id)


@pytest.mark.parametrize("page", PAGES)
def test_a_poisoned_run_in_the_store_breaks_no_page(poisoned, page):
    assert poisoned in RunStore().corrupt_runs()
    app = AppTest.from_file(APP, default_timeout=300).run()
    app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
    assert str(default_root()) not in " ".join(c.value for c in app.sidebar.caption)  # no server path shown


def test_an_analysis_over_budget_is_a_warning_in_its_place(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "1")  # nothing fits in 1 MB
    st.cache_data.clear()  # a map cached by an earlier test in this process would be shown without a check
    app = AppTest.from_file(APP, default_timeout=300)
    app.session_state["run_id"] = preset_ids()["Transformer RoPE"]
    app.run()
    app.switch_page("pages/attention.py").run()
    assert not app.exception, [e.value for e in app.exception]
    refused = [shown(w.value) for w in app.warning if MEMORY_ENV in shown(w.value)]
    assert refused and all(text.startswith("No map at L") for text in refused)
    app.switch_page("pages/transformer.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert any(MEMORY_ENV in shown(w.value) for w in app.warning)


def test_the_train_form_shows_the_estimate_against_the_budgets(monkeypatch):
    app = AppTest.from_file(APP, default_timeout=300).run()
    app.switch_page("pages/train.py").run()
    estimate = [c.value for c in app.caption if c.value.startswith("Estimated")]  # measured or the model's, said
    assert estimate and "Memory: about" in estimate[0] and "per training" in estimate[0]
    app.number_input(key="train-layers").set_value(8).run()
    app.number_input(key="train-heads").set_value(16).run()
    app.number_input(key="train-d-model").set_value(512).run()
    app.number_input(key="train-length").set_value(512).run()
    app.number_input(key="train-steps").set_value(50_000).run()
    app.selectbox(key="train-task").set_value("shift").run()
    warnings = [shown(w.value) for w in app.warning if w.value.startswith("Too costly")]
    assert warnings and (MEMORY_ENV in warnings[0] or TRAIN_SECONDS_ENV in warnings[0])
    app.button[0].click().run()  # Train anyway: refused with the same message, nothing queued
    assert not app.exception and any("Cannot train" in e.value for e in app.error)
    assert os.environ.get(MEMORY_ENV) is None


def test_a_dilution_view_over_budget_is_a_warning(monkeypatch):
    monkeypatch.setenv("LENGEN_REQUEST_SECONDS", "1")
    app = AppTest.from_file(APP, default_timeout=300).run()
    app.session_state["dilution-samples"] = 1024  # 4 × the default samples,
    app.session_state["dilution-longest"] = 1 << 20  # to 2^20: several seconds estimated, over the 1 s limit
    app.switch_page("pages/dilution.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert any(shown(w.value).startswith("Not evaluated here") and "LENGEN_REQUEST_SECONDS" in shown(w.value)
               for w in app.warning)


def test_the_attention_page_draws_the_head_it_is_asked_for():
    app = AppTest.from_file(APP, default_timeout=300)
    app.session_state["run_id"] = preset_ids()["Transformer RoPE"]
    app.run()
    app.switch_page("pages/attention.py").run()
    assert "layer 0, head 0" in app.info[0].value
    app.selectbox(key="attention-head").set_value("L1H1").run()
    assert not app.exception, [e.value for e in app.exception]
    assert "layer 1, head 1" in app.info[0].value
    assert app.query_params["head"] == ["L1H1"] or app.query_params["head"] == "L1H1"

"""Every page renders without an exception: with no run, with a preset, and after a short training."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.presets import DEFAULT_PRESET, preset_ids
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from tests.helpers.waiting import wait_for
from ui.training.pool import training_pool

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGES = ["pages/start.py", "pages/train.py", "pages/attention.py", "pages/carrier.py", "pages/dilution.py"]


def open_app(run_id: str | None = "default") -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    if run_id != "default":
        app.session_state["run_id"] = run_id
    return app.run()


def assert_clean(app: AppTest) -> None:
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_with_no_run(page: str) -> None:
    app = open_app(run_id=None)
    app.switch_page(page).run()
    assert_clean(app)


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_with_a_run_missing_from_the_store(page: str) -> None:
    app = open_app(run_id="rope-softmax-retrieval-s0-000000000000")
    app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_the_default_preset(page: str) -> None:
    app = open_app()
    assert app.session_state["run_id"] == preset_ids()[DEFAULT_PRESET]
    app.switch_page(page).run()
    assert_clean(app)
    if page != "pages/start.py":
        assert app.get("plotly_chart") or page == "pages/train.py"


def test_preset_button_selects_the_preset() -> None:
    app = open_app()
    app.button(key="preset-Learned (APE)").click().run()
    assert app.session_state["run_id"] == preset_ids()["Learned (APE)"]
    app.switch_page("pages/attention.py").run()
    assert_clean(app)


def test_config_error_is_a_message_next_to_the_form() -> None:
    app = open_app()
    app.switch_page("pages/train.py").run()
    app.number_input[0].set_value(20)  # offset ≥ training length 16
    app.button[0].click().run()
    assert not app.exception
    assert any("offset 20 must be smaller" in e.value for e in app.error)


def train_from_page(steps: int) -> AppTest:
    app = open_app()
    app.switch_page("pages/train.py").run()
    inputs = {n.label: n for n in app.number_input}
    inputs["Steps"].set_value(steps)
    app.button[0].click().run()
    assert_clean(app)
    if "training_ticket" in app.session_state:  # not yet done when the first run ended
        ticket, pool = app.session_state["training_ticket"], training_pool()
        wait_for(lambda: pool.status(ticket).state not in ("queued", "running"), timeout=120)  # the training ends
        app.run()  # the polling fragment sees the job done, saves the selection and reruns the app
    assert_clean(app)
    return app


def test_train_page_trains_stores_and_selects_a_short_run() -> None:
    app = train_from_page(steps=30)
    expected = with_changes(RunConfig(), steps=30)
    assert app.session_state["run_id"] == expected.run_id()
    assert RunStore().exists(expected.run_id())
    assert any("saved and selected" in s.value for s in app.success)
    for page in PAGES[2:]:
        app.switch_page(page).run()
        assert_clean(app)

    again = train_from_page(steps=30)  # same config and seed: opened at once, not retrained
    assert any("already trained" in s.value for s in again.success)


def test_the_app_hands_the_interpreter_lock_on_every_millisecond() -> None:
    """The server's event loop waits behind the sessions' script threads for the lock; app.py
    shortens the switch interval from Python's 5 ms so health checks and pages stay answered."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    try:
        open_app()
        assert sys.getswitchinterval() == pytest.approx(0.001)
    finally:
        sys.setswitchinterval(before)

"""The Delays page: a shipped delay run drawn against the delay with a caption read from its numbers; a run
of another task gets the presets to open instead; the other pages send a delay run to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.presets import DELAY_PRESETS, delay_presets, preset_ids

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_page(page: str, run_id: str | None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.session_state["run_id"] = run_id
    app.run()
    app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def captions(app: AppTest) -> str:
    return " ".join(c.value for c in app.caption)


def test_a_delay_run_is_drawn_against_the_delay_with_its_own_numbers() -> None:
    run_id = delay_presets()["Delay-copy RoPE"]
    app = open_page("pages/delays.py", run_id)
    text = captions(app)
    assert "On its training delays 2-8 this run answers 1.00" in text
    assert "a kernel that peaks at the delays it trained on" in text and "As C10 expects" in text
    assert "delays 2-8" in text  # the run summary names the delays, not an offset
    assert "From 1 training delay to 15" in text and "no cell reaches the bar (0.9) over its unseen delays" in text


@pytest.mark.slow  # two more page runs with their curves
def test_selective_copy_holds_and_a_retrieval_run_is_sent_to_the_presets() -> None:
    app = open_page("pages/delays.py", delay_presets()["Selective-copy RoPE"])
    assert "finds the source wherever it is" in captions(app)
    other = open_page("pages/delays.py", preset_ids()["RoPE"])
    assert any("not on a delay task" in info.value for info in other.info)
    assert {f"Open {label}" for label in DELAY_PRESETS} <= {button.label for button in other.button}


@pytest.mark.parametrize("page", ["pages/transformer.py", "pages/attention.py", "pages/dilution.py"])
def test_the_length_pages_send_a_delay_run_to_the_delays_page(page: str) -> None:
    app = open_page(page, delay_presets()["Delay-copy RoPE"])
    assert any("Delays page" in info.value for info in app.info)


def warnings(app: AppTest) -> list[str]:
    return [w.value.replace("\\", "") for w in app.warning]  # the form escapes markdown


@pytest.mark.slow  # three runs of the Train page (≈ 7 s); the messages themselves are test_delays.py's
def test_the_train_form_asks_a_delay_task_for_its_delays() -> None:
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py").run()
    next(box for box in app.selectbox if box.label == "Task").set_value("delay-copy")
    app.run()
    assert any("needs its training delays, e.g. delays 2-8" in w for w in warnings(app))
    next(text for text in app.text_input if text.label == "Training delays").set_value("2-8")
    next(n for n in app.number_input if n.label == "Training length").set_value(32)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert not any("Not a valid configuration" in w for w in warnings(app))
    next(text for text in app.text_input if text.label == "Training delays").set_value("8-2")
    app.run()
    assert any("the range 8-2 runs backwards; write 2-8" in w for w in warnings(app))

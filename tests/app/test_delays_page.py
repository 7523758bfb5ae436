"""The Delays page: a shipped delay run drawn against the delay with a caption read from its numbers; a run
of another task gets the presets to open instead; the other pages send a delay run to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.presets import DELAY_PRESETS, delay_presets, preset_ids

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


def transfer_app(monkeypatch: pytest.MonkeyPatch, after: str, steps: int, seconds: str = "120",
                 app: AppTest | None = None) -> AppTest:
    """The Delays page on the RoPE delay preset (A = 2-8), its transfer form filled in and clicked."""
    monkeypatch.setenv("LENGEN_REQUEST_SECONDS", seconds)
    app = app or open_page("pages/delays.py", delay_presets()["Delay-copy RoPE"])
    next(t for t in app.text_input if t.label == "Delays B").set_value(after)
    next(n for n in app.number_input if n.label == "Most steps on B").set_value(steps)
    next(b for b in app.button if b.label == "Measure transfer").click()
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_transfer_is_refused_before_any_training_with_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The form's checks without the page (quick): bad delays B, bad steps, and over the request's time."""
    from lengen_core.config import ConfigError
    from ui.delays import measure_transfer
    from ui.runs import load_run

    run = load_run(delay_presets()["Delay-copy RoPE"])
    told = []
    for after, steps, seconds, message in (
            ("3-5", 100, "120", "all among the delays this run trained on (2-8)"),
            ("9-", 100, "120", "is not a delay or a range"),
            ("32", 100, "120", "must be smaller than"),
            ("9-16", 0, "120", "steps"),
            ("9-16", 1_000, "5", "this transfer measurement would take about")):
        monkeypatch.setenv("LENGEN_REQUEST_SECONDS", seconds)
        with pytest.raises(ConfigError, match=re.escape(message)):
            measure_transfer(run, after, steps, lambda *args: told.append(args))
    assert told == []  # refused before any step


@pytest.mark.slow  # one page run (≈ 5 s) and three clicks
def test_transfer_refuses_bad_delays_and_an_over_budget_request_before_any_training(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = transfer_app(monkeypatch, "3-5", 1_000)
    assert any("are all among the delays this run trained on (2-8): name at least one it never saw" in w
               for w in warnings(app))
    app = transfer_app(monkeypatch, "40", 1_000, app=app)
    assert any("must be smaller than" in w for w in warnings(app)), warnings(app)
    app = transfer_app(monkeypatch, "9-16", 1_000, seconds="5", app=app)
    assert any("this transfer measurement would take about" in w and "LENGEN_REQUEST_SECONDS" in w
               for w in warnings(app)), warnings(app)
    assert not any("Learning delays" in c for c in (c.value for c in app.caption))


@pytest.mark.slow  # two trainings on delays B (≈ 3 s) besides the page
def test_transfer_in_the_browser_is_the_cores_measurement_with_its_own_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lengen_core.transfer import transfer_from
    from ui.runs import load_run

    app = transfer_app(monkeypatch, "9-16", 400)
    expected = transfer_from(load_run(delay_presets()["Delay-copy RoPE"]), "9-16", 400)
    text = captions(app)
    assert (f"Learning delays 9-16 took {expected.steps_from_scratch:,} steps from scratch and "
            f"{expected.steps_from_pretrained:,} steps from this run's weights") in text, text
    assert f"×{expected.speedup:.1f} faster" in text  # positive on this preset: A = 2-8 helps B = 9-16

"""The Lessons page: every shipped lesson, every step, opened from its link (AppTest), the link following
Back and Next, presenter mode and students' locks, and a malformed lesson file's message."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.address import address
from ui.lessons.files import ELEMENTS, load_lessons

APP = str(Path(__file__).resolve().parents[2] / "app.py")
LESSONS, _ = load_lessons()
STEPS = [(name, number) for name, lesson in LESSONS.items() for number in range(1, len(lesson.steps) + 1)]


def open_link(params: dict[str, str]) -> AppTest:
    """The app opened at `/?...` (the root page, as a pasted link does)."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update(params)
    return app.run()


def texts(app: AppTest) -> str:
    return " ".join(e.value for kind in ("caption", "markdown", "header", "warning", "error", "info")
                    for e in app.get(kind) if isinstance(getattr(e, "value", None), str))


@pytest.mark.parametrize("name, number", STEPS)
def test_every_step_of_every_lesson_opens_from_its_link_and_draws_its_element(name, number):
    lesson = LESSONS[name]
    step = lesson.steps[number - 1]
    app = open_link({"lesson": name, "step": str(number)})
    assert not app.exception, [e.value for e in app.exception]
    assert f"Step {number} of {len(lesson.steps)}" in texts(app)
    assert app.header[0].value == step.title
    if ELEMENTS[step.element].runs == "config":  # the Train form, holding the lesson's run
        assert any(b.label == "Train" for b in app.button)
        assert app.session_state["_train_prefilled"] == step.config
    elif step.element == "delay-transfer":  # measured on a click, not on the way through (keeps the walk cheap)
        assert any(b.label == "Measure transfer" for b in app.button)
    else:
        assert app.get("plotly_chart"), f"{name} step {number}: no chart drawn"
    labels = [e.label for e in app.expander]  # a caption's details may fold into an expander of their own
    assert labels.count("Show the answer") == 1 and labels[-1] == "Show the answer", labels
    assert app.query_params["lesson"] == name and app.query_params["step"] == str(number)
    assert not app.warning or all("Not shown on this server" not in w.value for w in app.warning)


def test_next_and_back_move_the_step_and_the_link_follows():
    app = open_link({"lesson": "why-rope-generalises", "step": "1"})
    assert app.button(key="lesson-back").disabled
    app.button(key="lesson-next").click().run()
    assert app.query_params["step"] == "2" and "Step 2 of 8" in texts(app)
    app.button(key="lesson-back").click().run()
    assert app.query_params["step"] == "1" and "Step 1 of 8" in texts(app)
    last = open_link({"lesson": "why-rope-generalises", "step": "8"})
    assert last.button(key="lesson-next").disabled


def test_a_bad_step_or_an_unknown_lesson_is_a_message():
    app = open_link({"lesson": "why-rope-generalises", "step": "99"})
    assert "this lesson has steps 1 to 8; showing step 1" in texts(app) and "Step 1 of 8" in texts(app)
    assert address(app)["step"] == ["1"]  # the address names the step shown, not step=99 (issue 40)
    app = open_link({"lesson": "no-such-lesson"})
    assert not app.exception
    assert "There is no lesson named no-such-lesson here: allowed why-rope-generalises, what-sets-the-horizon" in texts(app).replace("\\", "")


def test_the_index_lists_each_lesson_with_its_steps_and_runs():
    app = open_link({})
    app.switch_page("pages/lessons.py").run()
    assert not app.exception, [e.value for e in app.exception]
    shown = texts(app)
    for lesson in LESSONS.values():
        assert f"{len(lesson.steps)} steps · runs it needs: {', '.join(lesson.runs())}" in shown


def test_a_malformed_lesson_file_is_a_message_naming_file_step_and_what_is_allowed(tmp_path, monkeypatch):
    good = (Path(__file__).resolve().parents[2] / "assets" / "lessons" / "why-rope-generalises.toml").read_text()
    (tmp_path / "good.toml").write_text(good, encoding="utf-8")
    (tmp_path / "broken.toml").write_text(good.replace('element = "carrier-chart"', 'element = "carrier"'),
                                          encoding="utf-8")
    monkeypatch.setattr("ui.lessons.files.LESSON_ROOT", tmp_path)
    app = open_link({"lesson": "broken"})
    assert not app.exception, [e.value for e in app.exception]
    message = texts(app).replace("\\", "")
    assert ("This lesson cannot be opened: broken.toml, step 7 ('The rule the RoPE head learned: the carrier'): "
            "unknown element 'carrier': allowed accuracy-overlay") in message
    assert not app.get("plotly_chart") and not app.expander  # no broken step in front of the class
    app = open_link({"lesson": "good", "step": "7"})
    assert not app.exception and app.get("plotly_chart")  # the good lesson still opens


def test_presenter_mode_shows_only_the_settings_the_lesson_sets_and_a_lock_fixes_them():
    full = open_link({"lesson": "why-rope-generalises", "step": "3"})
    presented = open_link({"lesson": "why-rope-generalises", "step": "3", "present": "1"})
    assert not presented.exception, [e.value for e in presented.exception]
    assert len(full.selectbox) + len(full.number_input) + len(full.radio) == 14 + 1  # every setting, and the pace
    assert [w.label for w in [*presented.selectbox, *presented.number_input]] == [
        "Positional encoding", "Seed", "Steps per second"]  # and the pace the lesson sets
    assert any("stSidebar" in str(getattr(e, "proto", "")) for e in presented.get("html"))
    assert not any("stSidebar" in str(getattr(e, "proto", "")) for e in full.get("html"))
    locked = open_link({"lesson": "why-rope-generalises", "step": "3", "lock": "1"})
    settings = [*locked.selectbox, *locked.number_input, *locked.radio, *locked.text_input]
    widgets = {w.label: w for w in settings}
    assert widgets["Positional encoding"].value == "learned" and widgets["Seed"].value == 1
    # The lesson's config is the whole run: a students' link fixes every setting, the pace stays theirs
    assert [w.label for w in settings if not w.disabled] == ["Steps per second"], [w.label for w in settings]
    assert len(settings) >= 15  # 14 settings the lesson's config sets (and the delays' text), with the pace


def test_a_trained_lesson_run_opens_on_its_page(tmp_path, monkeypatch):
    """A step whose run is stored offers to open it: the button selects it and opens its page. (A lesson that
    trains seed 0 of the default config asks for the RoPE preset's run, which ships.)"""
    from lengen.presets import PRESETS

    untrained = open_link({"lesson": "why-rope-generalises", "step": "2"})
    assert "lesson-open-run" not in [b.key for b in untrained.button]  # seed 1 is not trained here
    (tmp_path / "again.toml").write_text("""title = "Again"
summary = "The RoPE preset, asked for again."
[[steps]]
title = "Train it"
text = "Train the default run."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
seed = 0
""", encoding="utf-8")
    monkeypatch.setattr("ui.lessons.files.LESSON_ROOT", tmp_path)
    app = open_link({"lesson": "again", "step": "1"})
    assert app.button(key="lesson-open-run").label == "Open the trained run on the Dilution page"
    app.button(key="lesson-open-run").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.session_state["run_id"] == PRESETS["RoPE"].run_id()
    assert app.title[0].value == "Accuracy against length: the dilution law"


def test_presenter_mode_drops_the_horizon_steps_train_longer_link():
    """A control the step does not use is not shown to a class: the horizon element's Train longer link
    is there in a lesson opened plainly and gone in presenter mode, the horizon itself drawn in both."""
    name = "what-sets-the-horizon"
    number = next(i for i, step in enumerate(LESSONS[name].steps, 1) if step.element == "horizon")
    plain = open_link({"lesson": name, "step": str(number)})
    shown = open_link({"lesson": name, "step": str(number), "present": "1"})
    for app in (plain, shown):
        assert not app.exception
        assert [m.label for m in app.metric][:2] == ["Horizon, measured", "Horizon, predicted"]
    assert [link.label for link in plain.get("page_link")] == ["Train longer"]
    assert not shown.get("page_link")

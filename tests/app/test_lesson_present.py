"""The Lessons page's Present and Open (AppTest): each sets the lesson's whole link as the page's query
parameters, so the address bar holds what is on screen; presenter mode puts a chart's caption beside it and
sizes the chart for a 1024×768 projector; a lesson's next Train step starts from its own settings."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.lessons.elements import PRESENT_HEIGHT, PRESENT_HEIGHTS
from ui.lessons.files import load_lessons

APP = str(Path(__file__).resolve().parents[2] / "app.py")
LESSONS, _ = load_lessons()


def opened(params: dict[str, str]) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update(params)
    return app.run()


def test_present_and_open_put_the_whole_link_in_the_address_bar():
    name = next(iter(LESSONS))
    index = opened({})
    index.switch_page("pages/lessons.py").run()
    assert index.caption and not any("Guided walks" in m.value for m in index.markdown)  # the intro said it twice
    index.button(key=f"lesson-present-{name}").click().run()
    assert not index.exception, [e.value for e in index.exception]
    assert (index.query_params["lesson"], index.query_params["step"], index.query_params["present"]) == (name, "1", "1")
    assert index.header[0].value == LESSONS[name].steps[0].title
    plain = opened({})
    plain.switch_page("pages/lessons.py").run()
    plain.button(key=f"lesson-open-{name}").click().run()
    assert plain.query_params["lesson"] == name and plain.query_params["step"] == "1"
    assert "present" not in plain.query_params


def order(app: AppTest) -> tuple[int, int]:
    """Where the first chart and the first "What to look for" come in the page's order of drawing."""
    drawn = list(app.main)
    chart = next(i for i, e in enumerate(drawn) if e.type == "plotly_chart")
    look = next(i for i, e in enumerate(drawn) if str(getattr(e, "value", "")).startswith("**What to look for:**"))
    return chart, look


def test_presenter_mode_sizes_the_chart_and_puts_its_caption_beside_it():
    name, number = "why-rope-generalises", 7  # the carrier: metrics above the chart, so a shorter chart
    step = LESSONS[name].steps[number - 1]
    shown = opened({"lesson": name, "step": str(number), "present": "1"})
    plain = opened({"lesson": name, "step": str(number)})
    assert not shown.exception, [e.value for e in shown.exception]
    height = json.loads(shown.get("plotly_chart")[0].proto.spec)["layout"]["height"]
    assert height == PRESENT_HEIGHTS.get(step.element, PRESENT_HEIGHT)
    assert json.loads(plain.get("plotly_chart")[0].proto.spec)["layout"]["height"] != height
    chart, look = order(plain)
    assert chart < look  # under the chart
    chart, look = order(shown)
    assert look < chart  # in the words' column, to the left of the chart


def test_next_to_another_train_step_starts_the_form_from_that_steps_settings():
    """Step 2 trains RoPE (seed 1), step 3 learned positions (seed 1): Next must not carry 'rope' over."""
    app = opened({"lesson": "why-rope-generalises", "step": "2", "present": "1"})
    assert {w.label: w.value for w in app.selectbox}["Positional encoding"] == "rope"
    app.button(key="lesson-next").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert {w.label: w.value for w in app.selectbox}["Positional encoding"] == "learned"
    assert app.session_state["_train_prefilled"] == LESSONS["why-rope-generalises"].steps[2].config

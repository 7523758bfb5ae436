"""The Start page, as a newcomer meets it: a lead in plain words, then a first step to the Lessons (the first
lesson at its first step, and the list of all), and only then the lab's jargon (claims C1-C10, carrier, dilution)."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.glossary import LEADS
from ui.lessons.files import load_lessons

APP = str(Path(__file__).resolve().parents[2] / "app.py")
JARGON = re.compile(r"\bC\d+\b|carrier|dilut|RoPE|APE|logit|softmax", re.IGNORECASE)
LINK = re.compile(r"\[([^\]]+)\]\([^)]+\)")


def in_order(node) -> list:
    """The page's elements, depth first, in the order they are drawn."""
    children = getattr(node, "children", None)
    if children is None:
        return [node]
    return [leaf for key in sorted(children) for leaf in in_order(children[key])]


def text_of(element) -> str:
    if element.type == "page_link":
        return element.proto.label
    value = getattr(element, "value", None)
    return value if isinstance(value, str) else ""


def open_start() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_the_first_step_to_the_lessons_comes_before_any_jargon() -> None:
    app = open_start()
    elements = in_order(app.main)
    links = [i for i, e in enumerate(elements) if e.type == "page_link"]
    first_link = elements[links[0]].proto
    name, lesson = next(iter(load_lessons()[0].items()))
    assert first_link.page == "lessons" and first_link.query_string == f"lesson={name}&step=1"
    assert lesson.title in first_link.label and f"{len(lesson.steps)} steps" in first_link.label
    assert elements[links[1]].proto.page == "lessons" and elements[links[1]].proto.query_string == ""
    before = [LINK.sub(r"\1", text_of(e)) for e in elements[:links[0]]]  # the title, the lead, the box's words
    assert LEADS["start"] in [text_of(e) for e in elements[:links[0]]]
    assert [text for text in before if JARGON.search(text)] == []
    after = " ".join(text_of(e) for e in elements[links[1]:])
    assert all(word in after for word in ("C1", "C10", "RoPE", "dilut"))  # the jargon is still there, below


def test_the_start_lead_quotes_the_presets_numbers() -> None:
    from lengen.presets import START_LENGTHS
    from lengen_core.config import RunConfig

    task = RunConfig().task
    assert f"the token {task.offset} places back in sequences of {task.train_length} tokens" in LEADS["start"]
    assert f"up to {START_LENGTHS[-1] // task.train_length} times longer" in LEADS["start"]

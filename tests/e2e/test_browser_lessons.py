"""End to end: a teacher opens lesson 1 from its link in presenter mode and walks it to the end in Debian's
chromium: no sidebar, no CSV buttons, only the settings the training steps fix; a live training started,
paused, stepped once and stopped from the lesson; each step's chart drawn, the link following the step.
Screenshots in artifacts/screenshots/lesson1-*.png."""

from __future__ import annotations

import re

import pytest

from tests.helpers.browser import MAIN, SHOTS, settle
from ui.lessons.files import load_lessons

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

LESSON = "why-rope-generalises"


def progress_text(page) -> str:
    return page.locator('[data-testid="stProgress"]').inner_text()


def test_lesson_one_walked_from_its_link_in_presenter_mode(server, browser) -> None:
    lesson = load_lessons()[0][LESSON]
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.goto(f"{server}/?lesson={LESSON}&step=1&present=1")
    for number, step in enumerate(lesson.steps, start=1):
        page.get_by_role("heading", name=step.title).wait_for(timeout=240_000)
        settle(page)
        main = page.locator(MAIN).inner_text()
        assert f"Step {number} of {len(lesson.steps)}" in main
        assert page.get_by_text(f"Step {number} of {len(lesson.steps)}").is_visible()  # not under a header
        assert re.search(rf"[?&]step={number}(&|$)", page.url) and "present=1" in page.url, page.url
        assert not page.locator('[data-testid="stSidebar"]').is_visible()  # presenter mode: no sidebar
        assert not any(button.is_visible() for button in page.locator('[data-testid="stDownloadButton"]').all())
        assert not page.locator('[data-testid="stException"]').count()
        if step.config is None:
            page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"]').length >= 1",
                                   timeout=120_000)
        else:  # the Train form shows only what the lesson sets
            assert "Positional encoding" in main and "Seed" in main
            assert "Learning rate" not in main and "Model width d_model" not in main and "Vocabulary V" not in main
        page.screenshot(path=SHOTS / f"lesson1-step{number}.png", full_page=True)
        if number == 2:
            train_watch_pause_and_step(page)
        if number == len(lesson.steps):
            break
        page.get_by_role("button", name="Next").click()
    page.get_by_text("Show the answer").click()
    page.get_by_text(lesson.steps[-1].answer.split()[0] + " " + lesson.steps[-1].answer.split()[1]).first.wait_for(
        timeout=30_000)
    assert page.get_by_role("button", name="Next").is_disabled()
    page.screenshot(path=SHOTS / "lesson1-answer.png", full_page=True)


def train_watch_pause_and_step(page) -> None:
    """Train the step's run, pause it, one step (exactly one), a screenshot of the paused run, then Stop."""
    page.get_by_role("button", name="Train", exact=True).click()
    page.wait_for_function("() => /step \\d+\\//.test(document.querySelector('[data-testid=\"stProgress\"]')"
                           "?.innerText || '')", timeout=240_000)
    page.get_by_role("button", name="Pause").click()
    page.get_by_text(re.compile(r"paused at step \d+/")).wait_for(timeout=60_000)
    page.wait_for_timeout(1_500)
    paused = int(re.search(r"paused at step (\d+)/", progress_text(page)).group(1))
    page.get_by_role("button", name="Step", exact=True).click()
    page.get_by_text(f"paused at step {paused + 1}/").wait_for(timeout=60_000)
    page.wait_for_timeout(2_000)  # nothing moves while paused
    assert f"paused at step {paused + 1}/" in progress_text(page)
    page.get_by_text(f"At step {paused + 1}:", exact=True).wait_for(timeout=60_000)  # the map and carrier at that step
    page.screenshot(path=SHOTS / "lesson1-step2-paused.png", full_page=True)
    page.get_by_role("button", name="Stop").click()
    page.get_by_text(re.compile("Stopped: saved and selected run")).wait_for(timeout=120_000)


@pytest.mark.parametrize("name, number", [("what-sets-the-horizon", 1), ("what-sets-the-horizon", 3),
                                          ("one-head-to-a-transformer", 2), ("one-head-to-a-transformer", 3)])
def test_the_other_lessons_steps_on_a_projector(server, browser, name, number) -> None:
    """A step of lessons 2 and 3 from its link in presenter mode: its chart drawn, no sidebar, no exception.
    Screenshots artifacts/screenshots/lesson-NAME-stepN.png."""
    step = load_lessons()[0][name].steps[number - 1]
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.goto(f"{server}/?lesson={name}&step={number}&present=1")
    page.get_by_role("heading", name=step.title).wait_for(timeout=240_000)
    settle(page)
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"]').length >= 1",
                           timeout=120_000)
    assert not page.locator('[data-testid="stSidebar"]').is_visible()
    assert not page.locator('[data-testid="stException"]').count()
    page.screenshot(path=SHOTS / f"lesson-{name}-step{number}.png", full_page=True)
    page.close()

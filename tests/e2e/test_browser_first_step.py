"""End to end: a newcomer's first screen. On the Start page at a student's 1366×768 and a projector's 1024×768, the
link to the first lesson is on screen without scrolling, above the first of the lab's claims (C1-C10); clicking it
opens that lesson at its first step. Screenshots in artifacts/screenshots/start-first-screen-WxH.png."""

from __future__ import annotations

import re

import pytest

from tests.helpers.browser import CHART, MAIN, SHOTS, settle
from ui.lessons.files import load_lessons

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

NAME, LESSON = next(iter(load_lessons()[0].items()))
SCREENS = [(1366, 768), (1024, 768)]


def box(locator) -> tuple[float, float]:
    """The top and bottom of the element in the viewport (the app scrolls inside its main element)."""
    found = locator.bounding_box()
    return found["y"], found["y"] + found["height"]


@pytest.mark.slow  # quick representative: tests/app/test_start_first_step.py (the same order, in AppTest)
def test_the_first_lesson_is_on_the_first_screen_and_opens_at_its_first_step(server: str, browser) -> None:
    tab = browser.new_page(viewport={"width": SCREENS[0][0], "height": SCREENS[0][1]})
    tab.goto(server)
    tab.wait_for_selector(CHART, timeout=180_000)
    settle(tab)
    link = tab.locator(MAIN).get_by_role("link", name=re.compile(f"Start lesson 1: {re.escape(LESSON.title)}"))
    for width, height in SCREENS:
        tab.set_viewport_size({"width": width, "height": height})
        tab.wait_for_timeout(500)
        tab.screenshot(path=SHOTS / f"start-first-screen-{width}x{height}.png")
        top, bottom = box(link)
        assert 0 <= top and bottom <= height, f"{width}x{height}: the first lesson's link at {top:.0f}-{bottom:.0f} px"
        claim_top, _ = box(tab.locator(MAIN).get_by_text(re.compile(r"\bC1\b")).first)
        assert claim_top > bottom, f"{width}x{height}: a claim ({claim_top:.0f} px) above the first step"
    link.click()
    tab.wait_for_url(re.compile(rf"[?&]lesson={NAME}(&|$)"), timeout=60_000)
    settle(tab)
    assert re.search(r"[?&]step=1(&|$)", tab.url), tab.url
    assert tab.get_by_role("heading", name=LESSON.steps[0].title).count(), "the lesson's first step is not shown"

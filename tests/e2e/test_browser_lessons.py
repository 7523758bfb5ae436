"""End to end, the teacher's path in Debian's chromium at a 1024×768 projector: the Lessons page's Present
opens the lesson's whole link (`?lesson=NAME&step=1&present=1` in the address bar); every step of every
lesson in assets/lessons, walked with Next in presenter mode, fits the screen without scrolling, its title,
chart (axes and legend), caption, question and Next inside the viewport; the link follows the step; on the
first live step a training is started, paused, stepped exactly once and stopped, its charts on the same
screen. Screenshots in artifacts/screenshots/present-NAME-stepN.png (and -live.png)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.helpers.browser import SHOTS, settle
from ui.lessons.files import load_lessons

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

PROJECTOR = {"width": 1024, "height": 768}
LESSONS = load_lessons()[0]  # every lesson the app offers, read from the files
# The live step where the class trains: the first that lets the seed be set (a seed no other test trains).
LIVE = next((name, number) for name, lesson in LESSONS.items() for number, step in enumerate(lesson.steps, start=1)
            if step.config is not None and "seed" in step.fixed)
# The app scrolls inside its main element, not the document: both must hold the page.
SCROLL = """() => { const main = document.querySelector('[data-testid="stMain"]');
    return [document.scrollingElement.scrollHeight, innerHeight, main.scrollHeight, main.clientHeight]; }"""


def scroll_needed(page) -> str | None:
    document, height, main, shown = page.evaluate(SCROLL)
    return None if document <= height and main <= shown else f"page {document}/{height} px, main {main}/{shown} px"


def outside(page, what: str, locator) -> list[str]:
    """`what` (each element `locator` finds that is drawn) not wholly inside the viewport. The boxes are read
    in one go: a live view redraws itself twice a second."""
    boxes = [box for box in locator.evaluate_all(
        "elements => elements.map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })")
        if box[2] or box[3]]
    if not boxes:
        return [f"{what}: not on the page"]
    width, height = PROJECTOR["width"] + 0.5, PROJECTOR["height"] + 0.5
    return [f"{what}: {box}" for box in boxes if box[0] < 0 or box[1] < 0 or box[0] + box[2] > width
            or box[1] + box[3] > height]


def step_off_screen(page, title: str, live: bool = False) -> list[str]:
    """What of the step on screen needs scrolling: the page itself, or its title, charts (each with its x axis
    and legend), chart captions, question or Next outside the viewport."""
    problems = [f"scrolls: {why}" for why in [scroll_needed(page)] if why]
    problems += outside(page, "title", page.get_by_role("heading", name=title))
    problems += outside(page, "question", page.locator(".st-key-lesson-question"))
    problems += outside(page, "Next", page.get_by_role("button", name="Next"))
    charts = page.locator('[data-testid="stPlotlyChart"]')
    if charts.count() or live:
        problems += outside(page, "chart", charts)
        problems += outside(page, "x axis", page.locator('[data-testid="stPlotlyChart"] .xaxislayer-above'))
        problems += outside(page, "legend", page.locator('[data-testid="stPlotlyChart"] .legend'))
        problems += outside(page, "caption", page.get_by_role("button", name="Captions") if live else  # folded
                            page.get_by_text("What to look for"))
    return [p for p in problems if not p.startswith("legend: not on")]  # a heatmap has no legend


def open_projector(browser, url: str):
    page = browser.new_page(viewport=PROJECTOR)
    page.goto(url)
    return page


def test_present_opens_the_whole_link_and_its_first_step_fits_a_projector(server, browser) -> None:
    """The quick representative: Present on the Lessons page puts the lesson's link in the address bar, in
    presenter mode, and its first step fits 1024×768 without scrolling."""
    name, lesson = next(iter(LESSONS.items()))
    page = open_projector(browser, f"{server}/lessons")
    settle(page)
    page.locator(f".st-key-lesson-present-{name}").get_by_role("button", name="Present").click()
    page.get_by_role("heading", name=lesson.steps[0].title).wait_for(timeout=240_000)
    settle(page)
    assert re.search(rf"[?&]lesson={name}(&|$)", page.url) and re.search(r"[?&]step=1(&|$)", page.url), page.url
    assert "present=1" in page.url, page.url
    assert not page.locator('[data-testid="stSidebar"]').is_visible()
    assert step_off_screen(page, lesson.steps[0].title) == []
    page.get_by_role("button", name="Next").click()
    page.get_by_role("heading", name=lesson.steps[1].title).wait_for(timeout=240_000)
    settle(page)  # the address is written as the step's run ends (ui.address), after its heading is drawn
    assert re.search(r"[?&]step=2(&|$)", page.url) and "present=1" in page.url, page.url  # the link follows
    page.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LESSONS))
def test_every_step_fits_a_projector_walked_with_next(server, browser, name) -> None:
    lesson = LESSONS[name]
    page = open_projector(browser, f"{server}/?lesson={name}&step=1&present=1")
    for number, step in enumerate(lesson.steps, start=1):
        page.get_by_role("heading", name=step.title).wait_for(timeout=240_000)
        settle(page)
        if step.config is None and step.element != "delay-transfer":  # the transfer chart waits for its click
            page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"]').length >= 1",
                                   timeout=120_000)
        shot = f"present-{name}-step{number}"
        page.screenshot(path=SHOTS / f"{shot}.png")
        assert f"Step {number} of {len(lesson.steps)}" in page.get_by_text(re.compile("Step \\d+ of")).inner_text()
        assert re.search(rf"[?&]step={number}(&|$)", page.url) and "present=1" in page.url, page.url
        assert not page.locator('[data-testid="stSidebar"]').is_visible()
        assert not any(button.is_visible() for button in page.locator('[data-testid="stDownloadButton"]').all())
        assert not page.locator('[data-testid="stException"]').count()
        assert step_off_screen(page, step.title) == [], shot
        if step.config is not None:  # the Train form shows only what the lesson sets
            shown = page.locator('[data-testid="stMain"]').inner_text()
            assert "Learning rate" not in shown and "Model width d_model" not in shown and "Vocabulary V" not in shown
            if (name, number) == LIVE:  # train, pause, exactly one step, the live view on the same screen
                pause_step_and_stop(page, step.title, shot)
        if number < len(lesson.steps):
            page.get_by_role("button", name="Next").click()
    page.get_by_text("Show the answer").click()
    assert page.get_by_role("button", name="Next").is_disabled()
    page.close()


CHART_PLACES = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map(chart => {
    const keys = [];
    for (let e = chart; e; e = e.parentElement) keys.push(...[...e.classList].filter(c => c.startsWith('st-key-')));
    return [keys.join(' < '), Math.round(chart.getBoundingClientRect().height), chart.checkVisibility()];
})"""


def visible_charts(page) -> list:
    return [chart for chart in page.locator('[data-testid="stPlotlyChart"]').all() if chart.is_visible()]


def progress_text(page) -> str:
    return page.locator('[data-testid="stProgress"]').inner_text()


def paused_at(page) -> int:
    page.get_by_text(re.compile(r"paused at step \d+/")).wait_for(timeout=60_000)
    return int(re.search(r"paused at step (\d+)/", progress_text(page)).group(1))


def pause_step_and_stop(page, title: str, shot: str) -> None:
    """Train the step's run (seed 7: a run no other test trains), pause it, exactly one step: the four live charts
    (300 px each, the horizon's from step 0) and controls on the same screen as the step; then Stop: the last
    frame stays with its verdict, and Open on Dilution opens the run there in presenter mode."""
    seed = page.get_by_role("spinbutton", name="Seed")
    seed.fill("7")
    seed.press("Enter")
    settle(page)
    page.get_by_role("button", name="Train", exact=True).click()
    page.wait_for_function("() => /step \\d+\\/|before its first step/.test("
                           "document.querySelector('[data-testid=\"stProgress\"]')?.innerText || '')", timeout=240_000)
    if "before its first step" in progress_text(page):  # the lesson starts it paused: Step takes the first
        page.get_by_role("button", name="Step", exact=True).click()
    else:
        page.get_by_role("button", name="Pause").click()
        page.wait_for_timeout(1_500)
    paused = paused_at(page)
    page.get_by_role("button", name="Step", exact=True).click()
    page.get_by_text(f"paused at step {paused + 1}/").wait_for(timeout=60_000)
    page.wait_for_timeout(2_000)  # nothing moves while paused
    assert f"paused at step {paused + 1}/" in progress_text(page)
    page.get_by_role("button", name="Captions").click()  # the four charts' captions, folded on a projector
    page.get_by_text(f"At step {paused + 1}:", exact=True).wait_for(timeout=60_000)  # the map and carrier then
    # the horizon chart, the 4th, from the untrained model's probe at step 0 on
    page.get_by_text(re.compile("every few dozen steps the weights predict how far the run reaches: at step 0")).wait_for()
    page.keyboard.press("Escape")
    page.mouse.move(0, 0)  # no tooltip over the screenshot
    page.wait_for_timeout(1_000)
    shown = visible_charts(page)  # (a rerun may hold hidden copies of the keyed charts for a moment)
    assert len(shown) == 4 and all(chart.bounding_box()["height"] >= 300 for chart in shown), page.evaluate(CHART_PLACES)
    page.screenshot(path=SHOTS / f"{shot}-live.png")
    off = step_off_screen(page, title, live=True)
    off += outside(page, "progress", page.locator('[data-testid="stProgress"]'))
    off += outside(page, "Step", page.get_by_role("button", name="Step", exact=True))
    assert off == [], f"{shot}-live"
    page.get_by_role("button", name="Stop").click()
    # The last frame stays, with the verdict and one click that opens the run, still in presenter mode
    page.get_by_text(re.compile(r"Stopped at step \d+ · ")).wait_for(timeout=120_000)
    page.wait_for_timeout(1_500)
    assert len(visible_charts(page)) == 4, page.evaluate(CHART_PLACES)
    page.screenshot(path=SHOTS / f"{shot}-finished.png")
    assert step_off_screen(page, title, live=True) == [], f"{shot}-finished"
    lesson = page.url
    page.get_by_role("button", name="Open on Dilution").click()
    page.get_by_role("heading", name=re.compile("Accuracy against length")).wait_for(timeout=120_000)
    assert "present=1" in page.url and not page.locator('[data-testid="stSidebarNav"]').is_visible(), page.url
    assert not page.locator('[data-testid="stSidebar"]').is_visible()  # the projector's layout on this page too
    page.get_by_role("link", name=re.compile("Back to the lesson")).click()  # to the step the class left
    page.get_by_role("heading", name=title).wait_for(timeout=120_000)
    assert parse_qs(urlsplit(page.url).query) == parse_qs(urlsplit(lesson).query), (page.url, lesson)

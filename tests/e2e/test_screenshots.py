"""Every page at a projector's 1400×900 and a small laptop's 1024×768: screenshots into
`artifacts/screenshots/` (look at them), no st.metric label or page link cut off, every chart wide enough to read.

One tab per viewport (one browser session, so the selected run follows it from page to page); the
transformer pages are visited again with the transformer preset selected, so their charts are drawn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
VIEWPORTS = {"1400x900": (1400, 900), "1024x768": (1024, 768)}
PAGES = ["Start", "Train", "Attention", "Carrier", "Dilution", "Compare", "Theory"]
TRANSFORMER_PAGES = ["Transformer", "Attention"]
MIN_CHART_WIDTH = 300

# Metric labels and page links with an element whose text overflows its box: cut off (ellipsis).
CUT_LABELS = """() => [...document.querySelectorAll('[data-testid="stMetricLabel"], [data-testid="stPageLink-NavLink"]')]
    .filter(label => [label, ...label.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
    .map(label => label.innerText)"""
PAGE_HEIGHT = "() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight"
CHART_WIDTHS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .map(chart => [chart.getBoundingClientRect().width, chart.querySelector('.gtitle')?.textContent ?? ''])"""


# True once nothing has been running for 2 s: a rerun's status widget shows up only after a moment, and a
# page may show a spinner between two cached calls.
IDLE = """() => {
    const busy = document.querySelector('[data-testid="stStatusWidget"], [data-testid="stSpinner"]');
    if (busy || window.idleSince === undefined) window.idleSince = busy ? undefined : Date.now();
    return !busy && Date.now() - window.idleSince > 2000;
}"""


def settle(tab, timeout_ms: int = 240_000) -> None:
    """Wait until the script run is over and plotly has drawn and resized its charts."""
    tab.evaluate("() => { window.idleSince = undefined; }")
    tab.wait_for_function(IDLE, timeout=timeout_ms, polling=200)
    tab.mouse.move(0, 0)  # no tooltip left over in the screenshots


def open_page(tab, title: str) -> None:
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title).click()
    settle(tab)


def check_and_shoot(tab, name: str) -> list[str]:
    """Screenshot the page; the problems found on it (cut labels, narrow charts, exceptions)."""
    # The app scrolls inside its main element, not the document: grow the window to the whole page first.
    width, height = tab.viewport_size["width"], tab.viewport_size["height"]
    tab.set_viewport_size({"width": width, "height": max(height, tab.evaluate(PAGE_HEIGHT))})
    tab.wait_for_timeout(500)
    tab.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    tab.set_viewport_size({"width": width, "height": height})
    problems = [f"{name}: label cut off: {label!r}" for label in tab.evaluate(CUT_LABELS)]
    problems += [f"{name}: chart {title!r} only {width:.0f} px wide" for width, title in tab.evaluate(CHART_WIDTHS)
                 if width < MIN_CHART_WIDTH]
    if tab.locator('[data-testid="stException"]').count():
        problems.append(f"{name}: exception on the page")
    return problems


def visit_every_page(tab, viewport: str) -> list[str]:
    tab.get_by_role("heading", name="The claims, and where to see them").wait_for(timeout=120_000)
    settle(tab)
    problems = []
    for title in PAGES:
        open_page(tab, title)
        problems += check_and_shoot(tab, f"{title.lower()}-{viewport}")
    open_page(tab, "Start")
    tab.get_by_role("button", name="Transformer RoPE").click()
    settle(tab)
    for title in TRANSFORMER_PAGES:
        open_page(tab, title)
        problems += check_and_shoot(tab, f"{title.lower()}-transformer-{viewport}")
    return problems


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_every_page_is_readable(server: str, browser, viewport: str) -> None:
    width, height = VIEWPORTS[viewport]
    tab = browser.new_page(viewport={"width": width, "height": height})
    try:
        tab.goto(server)
        problems = visit_every_page(tab, viewport)
    finally:
        tab.close()
    assert not problems, problems

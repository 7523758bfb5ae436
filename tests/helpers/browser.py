"""What the browser tests share: Debian's chromium and its flags, the screenshot folder, the selectors,
and `settle` (wait until a page has finished its script run and drawn its charts).

Playwright itself is imported by the tests (`pytest.importorskip`), not here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"  # Debian's (Playwright cannot download browsers here)
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]

CHART = ".js-plotly-plot"
VEGA = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'
MAIN = '[data-testid="stMain"]'

# True once nothing has run for IDLE_MS on end: neither Streamlit's status widget (shown while a script
# runs) nor a spinner. A rerun's status widget shows up only a moment after the click, a page may show a
# spinner between two cached calls, and plotly and vega draw (and resize) after the run is over: a
# quiet spell this long covers all three. Each `settle` passes a fresh token, so the quiet spell is
# counted from that call on (in a page that navigated in between too), with no separate evaluate.
IDLE_MS = 2_000
IDLE = """([token, quiet]) => {
    const busy = document.querySelector('[data-testid="stStatusWidget"], [data-testid="stSpinner"]');
    if (window.settleToken !== token) { window.settleToken = token; window.idleSince = undefined; }
    if (busy || window.idleSince === undefined) window.idleSince = busy ? undefined : Date.now();
    return !busy && Date.now() - window.idleSince > quiet;
}"""
_tokens = itertools.count()


def settle(tab, timeout_ms: int = 240_000) -> None:
    """Wait until the script run is over and plotly or vega has drawn and resized its charts; no
    tooltip left over for a screenshot. `timeout_ms` is generous: the machine may be shared."""
    tab.wait_for_function(IDLE, arg=[next(_tokens), IDLE_MS], timeout=timeout_ms, polling=200)
    tab.mouse.move(0, 0)


def open_page(tab, title: str, timeout_ms: int = 240_000) -> None:
    """Click `title` in the sidebar's navigation and settle."""
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title).click()
    settle(tab, timeout_ms)


def choose_tab(tab, label: str, timeout_ms: int = 240_000) -> None:
    """Click the page's tab `label` (Theory's sections: ui.theory.sections) and settle."""
    tab.locator(MAIN).get_by_role("tab", name=label, exact=True).click()
    settle(tab, timeout_ms)


# --- readability of a whole page (the screenshot tests) ----------------------------------------------

VIEWPORTS = {"1400x900": (1400, 900), "1024x768": (1024, 768)}  # a projector's, a small laptop's
MIN_CHART_WIDTH = 300
# Metric labels and page links with an element whose text overflows its box: cut off (ellipsis).
CUT_LABELS = """() => [...document.querySelectorAll('[data-testid="stMetricLabel"], [data-testid="stPageLink-NavLink"]')]
    .filter(label => [label, ...label.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
    .map(label => label.innerText)"""
PAGE_HEIGHT = "() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight"
CHART_WIDTHS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .map(chart => [chart.getBoundingClientRect().width, chart.querySelector('.gtitle')?.textContent ?? ''])"""


def check_and_shoot(tab, name: str) -> list[str]:
    """Screenshot the page into SHOTS/`name`.png; the problems found on it (cut labels, narrow charts,
    exceptions)."""
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


# --- first visits, timed in the browser ------------------------------------------------------------------

FIRST_VISIT_SECONDS = 3.0  # issue 26's bar for a first visit to a run just trained (docs/serving.md)
TITLES = {"Dilution": "Accuracy against length", "Attention": "Attention beyond the training length",
          "Carrier": "The carrier kernel", "Compare": "Compare runs"}  # the pages timed, by their headings
# True (and the time noted once) when the page titled `title` shows a drawn plotly chart that is not a stale one
DRAWN = """([title, key]) => {
    const fresh = (e) => !e.closest('[data-stale="true"]');
    const main = document.querySelector('[data-testid="stMain"]');
    if (!main) return false;
    const titled = [...main.querySelectorAll('h1')].some(h => fresh(h) && h.innerText.includes(title));
    const drawn = [...main.querySelectorAll('.js-plotly-plot')].some(c => fresh(c) && c.querySelector('.main-svg'));
    if (titled && drawn && window[key] === undefined) window[key] = performance.now();
    return titled && drawn;
}"""


def clicked(tab, link: str, title: str, timeout_ms: int = 300_000) -> float:
    """Seconds from the click on `link` in the sidebar to the first chart of the page titled `title`,
    measured in the browser (performance.now()), with no settling counted."""
    key = f"drawn_{link}"
    start = tab.evaluate(f"() => {{ window['{key}'] = undefined; return performance.now(); }}")
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=link).click()
    tab.wait_for_function(DRAWN, arg=[title, key], timeout=timeout_ms, polling="raf")
    return (tab.evaluate(f"() => window['{key}']") - start) / 1000

"""A run trained in the app opens at once: its training measured the pages' default request before it
reported the run done (lengen_core.serving.first_visit), so the first visit to Dilution, Attention, Carrier
and Compare reads stored numbers. Timed in the browser (performance.now()) from the click on the page's
link, or from the navigation for a link, to the first plotly chart of that page drawn (not a stale one
of the page before), on a server of its own that measures on save (the suite's own servers do not:
tests/conftest.py). The four pages' first visits (sidebar clicks in one session) must be within
FIRST_VISIT_SECONDS; the run added on Compare, a first visit by link (a fresh session) and a rule
added on Dilution are timed and recorded, not bounded. The figures are written to
SHOTS/first-visit-times.json and into docs/serving.md."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.helpers.browser import DRAWN, FIRST_VISIT_SECONDS, SHOTS, TITLES, clicked, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial]
playwright = pytest.importorskip("playwright.sync_api")

STEPS = "400"  # enough for the default run to learn the rule here, so its law and horizon are measured too
ADDED = """([tag, key]) => {
    const named = [...document.querySelectorAll('.js-plotly-plot .legendtext')]
        .some(t => !t.closest('[data-stale="true"]') && t.textContent.includes(tag));
    if (named && window[key] === undefined) window[key] = performance.now();
    return named;
}"""
RULE_DRAWN = """([key]) => {
    const drawn = [...document.querySelectorAll('.js-plotly-plot .gtitle')]
        .some(t => !t.closest('[data-stale="true"]') && t.textContent.includes('Accuracy under each rule'));
    if (drawn && window[key] === undefined) window[key] = performance.now();
    return drawn;
}"""


@pytest.fixture(scope="module")
def tab(measuring_server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    page.goto(measuring_server)
    settle(page)
    return page


def linked(tab, url: str, title: str, script: str = DRAWN, arg: list | None = None) -> float:
    """Seconds from the start of the navigation to `url` to the page's first chart (or `script`)."""
    tab.goto(url)
    key = "drawn_link"
    tab.wait_for_function(script, arg=arg or [title, key], timeout=300_000, polling="raf")
    return tab.evaluate(f"() => window['{key}']") / 1000  # performance.now() counts from the navigation


def test_a_run_trained_in_the_app_opens_each_page_within_seconds(tab, measuring_server):
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Train").click()
    settle(tab)
    steps = tab.get_by_role("spinbutton", name="Steps", exact=True)
    steps.fill(STEPS)
    steps.press("Tab")
    tab.get_by_role("button", name="Train", exact=True).click()
    tab.get_by_text("measuring…").first.wait_for(timeout=300_000)  # the live view says what it is doing
    tab.mouse.move(0, 0)
    tab.screenshot(path=SHOTS / "first-visit-measuring.png", full_page=True)
    tab.get_by_text("saved and selected").wait_for(timeout=600_000)
    run_id = re.search(r"saved and selected run (\S+?)\.", tab.locator('[data-testid="stMain"]').inner_text().replace("`", ""))
    assert run_id, tab.locator('[data-testid="stMain"]').inner_text()[:500]
    run_id = run_id.group(1)
    settle(tab)

    times = {}
    for link in ("Dilution", "Attention", "Carrier", "Compare"):  # Compare opens on the three presets
        times[link] = clicked(tab, link, TITLES[link])
        settle(tab)
        assert not tab.locator('[data-testid="stException"]').count(), link
        tab.screenshot(path=SHOTS / f"first-visit-{link.lower()}.png", full_page=True)
    # Compare with the new run added beside the presets: from the choice to a chart whose legend names it
    tag = run_id.rsplit("-", 1)[-1][:6]
    tab.get_by_role("combobox", name="Runs").click()
    option = tab.get_by_role("option", name=re.compile(re.escape(f"#{tag}")))
    start = tab.evaluate("() => { window.drawn_added = undefined; return performance.now(); }")
    option.click()
    tab.wait_for_function(ADDED, arg=[f"#{tag}", "drawn_added"], timeout=300_000, polling="raf")
    times["Compare, the new run added"] = (tab.evaluate("() => window.drawn_added") - start) / 1000
    tab.keyboard.press("Escape")
    settle(tab)
    assert not tab.locator('[data-testid="stException"]').count()
    tab.screenshot(path=SHOTS / "first-visit-compare-added.png", full_page=True)
    main = tab.locator('[data-testid="stMain"]')
    assert "measured once before anyone opened a page" in main.inner_text()  # it read the stored numbers
    # A first visit by link: a fresh session (the app's scripts loaded, the router run, the stored numbers read)
    times["Dilution by link"] = linked(tab, f"{measuring_server}/dilution?run={run_id}", TITLES["Dilution"])
    settle(tab)
    assert "measured once before anyone opened a page" in main.inner_text()
    # A rule added on Dilution, by link (the same page with log-n chosen): its cost is this less the link above
    times["Dilution + log-n by link"] = linked(tab, f"{measuring_server}/dilution?run={run_id}&rules=log-n", "",
                                               RULE_DRAWN, ["drawn_link"])
    settle(tab)
    tab.screenshot(path=SHOTS / "first-visit-dilution-rule.png", full_page=True)
    record = {"run": run_id, "steps": int(STEPS), "seconds": {k: round(v, 2) for k, v in times.items()},
              "load": os.getloadavg()}
    (SHOTS / "first-visit-times.json").write_text(json.dumps(record, indent=2))
    print(record)
    slow = {page: s for page, s in times.items() if page in TITLES and s > FIRST_VISIT_SECONDS}
    assert not slow, f"first visits over {FIRST_VISIT_SECONDS} s: {slow} (load {os.getloadavg()})"

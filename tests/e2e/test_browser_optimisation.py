"""The Theory page's optimisation experiment (C1) in a browser, at 1400×900 and 1024×768: its three
charts are drawn with data, wide enough to read, with their computed captions; each chart and the
whole page are screenshot into `artifacts/screenshots/` (look at them)."""

from __future__ import annotations

import pytest

from tests.helpers.browser import SHOTS, VIEWPORTS, check_and_shoot, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

TITLES = {  # chart file name -> words of its title (ui.theory.gradient_charts)
    "reach": "The same learned table, built or trained",
    "gradients": "Gradient norm of each position row",
    "drift": "Accuracy at 4× the training length",
}
CAPTIONS = ("Built by hand, the learned table answers", "Over all", "Started from the built head")
# Drawn marks inside a chart: the points of its lines, or the cells of a heatmap (an image).
MARKS = """chart => chart.querySelectorAll('.scatterlayer .point').length
    + chart.querySelectorAll('.heatmaplayer image, .hm image').length"""


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_optimisation_experiment_is_drawn_and_readable(browser, server: str, viewport: str) -> None:
    width, height = VIEWPORTS[viewport]
    tab = browser.new_page(viewport={"width": width, "height": height})
    tab.goto(server)
    tab.get_by_role("heading", name="The claims, and where to see them").wait_for(timeout=120_000)
    settle(tab)
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Theory").click()
    tab.get_by_role("heading", name="1. The RoPE logit").wait_for(timeout=120_000)
    settle(tab)
    tab.locator('[data-testid="stMain"]').get_by_role("tab", name="Learned positions (C1)", exact=True).click()
    tab.get_by_role("heading", name="Can learned positions express the rule").wait_for(timeout=120_000)
    settle(tab, timeout_ms=400_000)  # nothing is trained: the experiment ships with the presets (scripts.build_presets)
    for name, title in TITLES.items():
        chart = tab.locator('[data-testid="stPlotlyChart"]', has=tab.locator(".gtitle", has_text=title))
        chart.scroll_into_view_if_needed()
        tab.wait_for_timeout(500)
        box = chart.bounding_box()
        assert box is not None and box["width"] >= 300 and box["height"] >= 300, (name, box)
        assert chart.evaluate(MARKS) > 0, f"{name}: nothing drawn"
        chart.screenshot(path=SHOTS / f"theory-c1-{name}-{viewport}.png")
    shown = tab.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
    for start in CAPTIONS:
        assert any(start in text for text in shown), start
    problems = check_and_shoot(tab, f"theory-c1-{viewport}")
    assert not problems, problems
    tab.close()

"""End to end for the Sweeps page: the preset sweep drawn by altair (vega-lite) in Debian's chromium,
with its collapse, and no exception; a run picked by a click on the collapse; a small sweep run from
the browser. Screenshots in artifacts/screenshots/sweeps-*.png."""

from __future__ import annotations

import pytest

from tests.helpers.browser import MAIN, SHOTS, VEGA, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")


def test_the_sweeps_page_draws_the_preset_sweep_and_its_collapse(open_tab) -> None:
    page = open_tab(4200)
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Sweeps").click()
    page.get_by_role("heading", name="The data collapse: every learned RoPE run on one curve").wait_for(timeout=240_000)
    settle(page)
    page.wait_for_function(f"() => document.querySelectorAll('{VEGA}').length >= 4", timeout=120_000)
    assert not page.locator('[data-testid="stException"]').count()
    text = page.locator(MAIN).inner_text()
    assert "in the scaled length against" in text and "rope: 12 runs" in text
    page.screenshot(path=SHOTS / "sweeps-preset.png", full_page=True)


def test_a_run_clicked_in_the_collapse_is_picked_in_the_table_at_1280_px(server, browser) -> None:
    """At 1,280 px: one panel per encoding, a click on a collapse point lists its run alone and fades the
    others in the charts below, and both tables (CSV, Parquet) are offered. Screenshot sweeps-picked.png."""
    page = browser.new_page(viewport={"width": 1280, "height": 4200})
    page.goto(server)
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Sweeps").click()
    page.get_by_role("heading", name="The data collapse: every learned RoPE run on one curve").wait_for(timeout=240_000)
    settle(page)
    page.wait_for_function(f"() => document.querySelectorAll('{VEGA}').length >= 4", timeout=120_000)
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    assert charts.nth(0).bounding_box()["width"] <= page.locator(MAIN).bounding_box()["width"]  # the panels fit
    points = charts.nth(1).locator('path[aria-roledescription="circle"]')
    assert points.count() >= 100  # the preset's learned RoPE runs at their lengths ≥ L_train
    label = points.nth(points.count() - 1).get_attribute("aria-label")  # the last drawn is on top
    fields = dict(part.split(": ", 1) for part in label.split("; "))
    box = points.nth(points.count() - 1).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.get_by_text("Picked 1 run").wait_for(timeout=120_000)
    settle(page)
    text = page.locator(MAIN).inner_text()
    assert f"Picked 1 run (k {fields['offset k']} seed {fields['seed']})" in text
    rows = page.locator('[data-testid="stDataFrame"] [role="row"]')
    assert rows.count() == 2, rows.count()  # the header and the picked run
    for name in ("Download the table (CSV)", "Download the table (Parquet)"):
        button = page.get_by_role("button", name=name)
        assert button.is_visible() and button.evaluate("b => b.scrollWidth <= b.clientWidth + 1")  # not cut short
    assert not page.locator('[data-testid="stException"]').count()
    page.screenshot(path=SHOTS / "sweeps-picked.png", full_page=True)


@pytest.mark.slow  # minutes of training; tests/app/test_sweeps_page.py runs a small grid on the server quickly
def test_a_small_sweep_runs_from_the_browser_and_is_shown(open_tab) -> None:
    """One cell, a short grid: progress while it runs, then its own results on the page."""
    page = open_tab(3000)
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Sweeps").click()
    page.get_by_role("button", name="Run the sweep").wait_for(timeout=240_000)
    settle(page)
    page.get_by_role("textbox", name="Offsets k").fill("2")
    page.get_by_role("textbox", name="Seeds").fill("5")
    page.get_by_role("textbox", name="Vocabulary sizes V").fill("8")
    page.keyboard.press("Tab")
    page.get_by_role("button", name="Run the sweep").click()
    page.get_by_text("This server's last sweep").wait_for(timeout=600_000)
    settle(page)
    page.get_by_text("This server's last sweep").click()
    settle(page)
    page.wait_for_function(f"() => document.querySelectorAll('{VEGA}').length >= 3", timeout=120_000)
    assert not page.locator('[data-testid="stException"]').count()
    text = page.locator(MAIN).inner_text()
    assert "rope: 1 run," in text and "learned: 1 run," in text  # the grid's two cells, not the preset's 24
    page.screenshot(path=SHOTS / "sweeps-run.png", full_page=True)

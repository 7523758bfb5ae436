"""The Start page as a cold start leaves it (ui.early): the invisible chart that made the browser load
plotly.js early is gone, the picture is drawn, and a chart's CSV (written only when its button is
clicked) downloads with the numbers drawn."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.helpers.browser import CHART, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def start(server: str, browser):
    tab = browser.new_page(viewport={"width": 1400, "height": 1600}, accept_downloads=True)
    tab.goto(server)
    tab.wait_for_selector(CHART, timeout=180_000)
    settle(tab)
    return tab


def test_the_early_chart_is_gone_and_the_picture_is_drawn(start) -> None:
    assert start.locator(".st-key-early-plotly").count() == 0
    assert start.locator(CHART).count() == 1
    assert "accuracy against length" in start.locator(".js-plotly-plot .gtitle").first.text_content()


def test_a_charts_csv_is_written_when_clicked(start) -> None:
    with start.expect_download(timeout=60_000) as download:
        start.get_by_role("button", name="Download data (CSV)").first.click()
    assert download.value.suggested_filename == "presets-start-accuracy.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    assert {row["run"] for row in rows} == {"RoPE", "Learned (APE)", "RoPE + linear attention"}
    assert all(row["samples"] == "128" for row in rows)

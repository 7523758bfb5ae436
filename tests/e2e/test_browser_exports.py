"""Exports fit for a paper and charts readable on a projector, in chromium (issue 40): the rendered chart text
(ticks, axis titles, legend, annotations) at least 14 px and 4.5:1 against the page, the camera's PNG drawn at
the export's size with its legend inside the image and clear of the axis title, and Compare's key numbers with
no cell cut at 1920 and 1366 px wide."""

from __future__ import annotations

import io
import re

import pytest

from tests.helpers.browser import SHOTS, settle
from ui.charts.export import EXPORT_SCALE, EXPORT_WIDTH
from ui.charts.readable import MIN_CONTRAST, MIN_FONT, contrast

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # quick representative: tests/unit/test_chart_readability.py

TEXTS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(chart =>
    [...chart.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .legendtext, .annotation-text')]
    .filter(e => e.textContent.trim()).map(e => [e.closest('.xtick, .ytick, .g-xtitle, .g-ytitle, .legend, .annotation')
        .classList[0], e.textContent,
        parseFloat(getComputedStyle(e).fontSize), getComputedStyle(e).fill]))"""
CUT_CELLS = """() => [...document.querySelectorAll('[data-testid="stTable"] td, [data-testid="stTable"] th')]
    .filter(cell => cell.scrollWidth > cell.clientWidth + 1 || [...cell.querySelectorAll('*')]
        .some(e => e.scrollWidth > e.clientWidth + 1)).map(cell => cell.innerText)"""
LEGEND_CLEAR = """() => [...document.querySelectorAll('.js-plotly-plot')].map(chart => {
    const svg = chart.querySelector('.main-svg').getBoundingClientRect();
    const legend = chart.querySelector('.legend')?.getBoundingClientRect();
    const title = chart.querySelector('.g-xtitle')?.getBoundingClientRect();
    return legend ? [legend.top >= (title ? title.bottom : 0) - 1, legend.bottom <= svg.bottom + 1] : [true, true];
})"""


def page(browser, server: str, path: str, width: int, height: int):
    tab = browser.new_page(viewport={"width": width, "height": height}, accept_downloads=True)
    tab.goto(f"{server}/{path}")
    settle(tab)
    tab.wait_for_selector(".js-plotly-plot .legend")
    return tab


def test_chart_text_on_the_page_is_at_least_14_px_and_4_5_to_1(browser, server: str) -> None:
    tab = page(browser, server, "dilution", 1920, 1080)
    texts = tab.evaluate(TEXTS)
    assert {kind for kind, *_ in texts} >= {"xtick", "ytick", "legend", "annotation"}, texts  # not about nothing
    for kind, text, size, fill in texts:
        red, green, blue = (int(c) for c in re.findall(r"\d+", fill)[:3])
        assert size >= MIN_FONT, (kind, text, size)
        assert contrast(f"#{red:02x}{green:02x}{blue:02x}") >= MIN_CONTRAST, (kind, text, fill)


def test_the_png_export_holds_its_legend(browser, server: str) -> None:
    from PIL import Image

    tab = page(browser, server, "dilution", 1920, 1080)
    chart = tab.locator(".js-plotly-plot").first
    chart.hover()
    with tab.expect_download() as download:
        chart.locator('.modebar-btn[data-title="Download plot as a PNG"]').click()
    png = Image.open(io.BytesIO(open(download.value.path(), "rb").read())).convert("L")
    assert download.value.suggested_filename == "chart-dilution.png"
    assert png.size[0] == EXPORT_WIDTH * EXPORT_SCALE
    png.save(SHOTS / "export-dilution.png")
    bottom = png.crop((0, png.size[1] - 4 * EXPORT_SCALE, png.size[0], png.size[1]))
    assert bottom.getextrema()[0] > 200, "the image is cut through something at its bottom edge"
    # The export lays the chart out afresh at EXPORT_WIDTH: the page laid out at that width shows where its legend goes.
    tab.set_viewport_size({"width": EXPORT_WIDTH + 420, "height": 1080})  # the sidebar and the main area's padding
    settle(tab)
    assert all(all(clear) for clear in tab.evaluate(LEGEND_CLEAR)), tab.evaluate(LEGEND_CLEAR)


@pytest.mark.parametrize("width, height", [(1920, 1080), (1366, 768)])
def test_compares_key_numbers_have_no_cell_cut(browser, server: str, width: int, height: int) -> None:
    tab = page(browser, server, "compare", width, height)
    tab.wait_for_selector('[data-testid="stTable"]')
    table = tab.locator('[data-testid="stTable"]').first
    table.scroll_into_view_if_needed()
    table.screenshot(path=SHOTS / f"compare-key-numbers-{width}x{height}.png")
    assert "answers alone" in table.inner_text()  # the longest cell, the RoPE preset's m_out, is there
    assert tab.evaluate(CUT_CELLS) == []
    box = table.bounding_box()
    assert box["x"] + box["width"] <= width  # the table fits the window: nothing scrolls out of sight

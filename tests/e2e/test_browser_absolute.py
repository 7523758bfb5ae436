"""The Transformer page's section on where absolute position comes from, in chromium on the Transformer RoPE
preset: per-head attention to position 0 (the sink), the probe against its untrained baseline, the
interventions' table and the mask's share, each drawn wide enough to read with its caption from the run's
numbers; screenshots into artifacts/screenshots/absolute-*.png."""

from __future__ import annotations

import pytest

from tests.helpers.browser import CHART, MAIN, SHOTS, check_and_shoot, open_page, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a whole Transformer page with its probes
playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
TITLES = ("The sink", "Position probe", "The mask's share")  # the section's charts, by their titles' start
SECTION_CHARTS = """(titles) => [...document.querySelectorAll('.js-plotly-plot')]
    .map(chart => [chart.querySelector('.gtitle')?.textContent ?? '', chart.getBoundingClientRect().width])
    .filter(([title]) => titles.some(t => title.startsWith(t)))"""


def test_the_absolute_position_section_on_the_rope_transformer_preset(server: str, browser) -> None:
    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        tab.goto(server)
        settle(tab)
        open_page(tab, "Transformer")
        tab.get_by_role("button", name="Open Transformer RoPE").first.click()
        main = tab.locator(MAIN)
        main.get_by_role("heading", name="Where absolute position comes from").wait_for(timeout=240_000)
        settle(tab)
        expect(main).to_contain_text("The interventions", timeout=240_000)
        drawn = tab.evaluate(SECTION_CHARTS, list(TITLES))
        for title in TITLES:
            assert any(shown.startswith(title) for shown, _ in drawn), (title, drawn)
        assert all(width >= 600 for _, width in drawn), drawn  # each as wide as the main column
        text = main.inner_text()
        assert "At L = 64, the probe beats its untrained baseline" in text
        assert "No head reads the sink" in text and "as relative logits must" in text
        table = main.locator('[data-testid="stDataFrame"]').filter(has_text="intervention")
        assert table.count() == 1
        assert tab.locator(CHART).count() >= 7 + len(TITLES)
        problems = check_and_shoot(tab, "absolute-transformer-rope")
        heading = main.get_by_role("heading", name="Where absolute position comes from")
        heading.scroll_into_view_if_needed()
        tab.screenshot(path=SHOTS / "absolute-section-top.png")
        main.get_by_text("The mask's share", exact=False).last.scroll_into_view_if_needed()
        tab.screenshot(path=SHOTS / "absolute-section-bottom.png")
    finally:
        tab.close()
    assert not problems, problems

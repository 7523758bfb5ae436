"""The Delays page in a browser at a projector's and a small laptop's size: a shipped delay run opened with one
click, its accuracy against the delay and the diversity sweep drawn wide enough to read, its transfer from
delays 2-8 to 9-16 measured with a click, nothing cut off (screenshots into artifacts/screenshots/delays-*.png)."""

from __future__ import annotations

import pytest

from tests.helpers.browser import CHART, VIEWPORTS, check_and_shoot, open_page, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_delays_page_draws_a_shipped_run_and_the_diversity_sweep(server: str, browser, viewport: str) -> None:
    width, height = VIEWPORTS[viewport]
    tab = browser.new_page(viewport={"width": width, "height": height})
    try:
        tab.goto(server)
        settle(tab)
        open_page(tab, "Delays")
        tab.get_by_role("button", name="Open Delay-copy RoPE").click()
        settle(tab)
        assert tab.locator(CHART).count() == 2  # accuracy and attention against the delay; the diversity sweep
        assert tab.get_by_text("a kernel that peaks at the delays it trained on", exact=False).count() == 1
        problems = check_and_shoot(tab, f"delays-{viewport}")
        tab.get_by_role("button", name="Measure transfer").click()  # A = 2-8 to the suggested B = 9-16
        settle(tab)
        assert tab.locator(CHART).count() == 3
        assert tab.get_by_text("Positive transfer: training on 2-8 first made 9-16", exact=False).count() == 1
        problems += check_and_shoot(tab, f"delays-transfer-{viewport}")
    finally:
        tab.close()
    assert not problems, problems

"""Every page at a projector's 1400×900 and a small laptop's 1024×768: screenshots into
`artifacts/screenshots/` (look at them), no st.metric label or page link cut off, every chart wide enough to read.

One tab per viewport (one browser session, so the selected run follows it from page to page); the
transformer pages are visited again with the transformer preset selected, so their charts are drawn.
"""

from __future__ import annotations

import pytest

from tests.helpers.browser import VIEWPORTS, check_and_shoot, open_page, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

PAGES = ["Start", "Train", "Attention", "Carrier", "Dilution", "Compare", "Theory"]
TRANSFORMER_PAGES = ["Transformer", "Attention"]
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

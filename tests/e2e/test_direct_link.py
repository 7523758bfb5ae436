"""A link straight to a page as a fresh server's first request (a shared link, a bookmark) gets the
whole app: the router's navigation, the sidebar with the linked run, and the page drawn for it.

Streamlit starts a server with a `pages/` folder beside its script in the older multipage mode, which
runs a page file alone; `ui` turns it off. Under `streamlit run serve.py` the server imports `ui`
before it decides the mode, and the page files' later runs found `ui` imported already: the mode
stayed on, the navigation listed file names ('app', 'train', …) and no page had its sidebar.
"""

from __future__ import annotations

import pytest

from lengen.presets import preset_ids
from tests.helpers.browser import settle
from tests.helpers.serving import serve_checkout

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

TITLES = ["Start", "Train", "Attention", "Carrier", "Dilution", "Compare", "Transformer", "Theory"]


@pytest.mark.parametrize("page", ["dilution", pytest.param("train", marks=pytest.mark.slow)])  # a fresh server each
def test_a_link_straight_to_a_page_as_the_first_request_gets_the_whole_app(browser, page):
    run_id = preset_ids()["Learned (APE)"]
    with serve_checkout() as served:
        tab = browser.new_page(viewport={"width": 1400, "height": 1200})
        tab.goto(f"{served['url']}/{page}?run={run_id}")
        sidebar = tab.locator('[data-testid="stSidebar"]')
        sidebar.get_by_text(f"Run id: {run_id}").wait_for(timeout=240_000)
        settle(tab)
        nav = tab.locator('[data-testid="stSidebarNav"]').inner_text()
        assert [title for title in TITLES if title in nav] == TITLES, nav
        assert "app" not in nav.split(), nav
        tab.close()

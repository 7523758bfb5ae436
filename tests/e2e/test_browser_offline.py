"""End to end: the lab works offline and tells no third party who uses it. Every request a page makes, in
chromium, goes to the app's own host and port (the favicon too, and the fonts: Streamlit bundles Source Sans
and the Material Symbols font the sidebar's icons are drawn with). A `:material/...:` page icon once made the
favicon a link to fonts.gstatic.com in every student's browser; the router now sets the favicon from
assets/favicon.svg (a data: URL, no request at all).

Chromium does not report a favicon's fetch to Playwright, so the tab's icon links are read from the page too.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.helpers.browser import CHART, open_page, settle
from ui.lessons.files import load_lessons

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

LOCAL_SCHEMES = {"data", "blob", "about"}  # content the page holds itself: nothing leaves the browser
ICONS = "() => [...document.querySelectorAll('link[rel~=\"icon\"]')].map(link => link.href)"
PAGES = ["Lessons", "Train", "Attention", "Carrier", "Dilution", "Compare", "Sweeps", "Transformer", "Delays",
         "Theory", "Start"]  # every page of the sidebar, from the Start page on


def off_server(urls: list[str], server: str) -> list[str]:
    """The addresses in `urls` that would leave the browser for anywhere but the app's own host:port."""
    own = urlsplit(server).netloc
    return [url for url in urls if urlsplit(url).scheme not in LOCAL_SCHEMES and urlsplit(url).netloc != own]


@pytest.fixture
def recorded(browser):
    """A fresh tab (a context of its own: nothing cached) and the list every request it makes is added to."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    tab = context.new_page()
    yield tab, requests
    context.close()


def test_the_start_page_asks_nothing_of_a_third_party(server: str, recorded) -> None:
    """The quick representative of the walk below: a first visit, the favicon, the bundled icon font."""
    tab, requests = recorded
    tab.goto(server)
    tab.wait_for_selector(CHART, timeout=180_000)
    settle(tab)
    icons = tab.evaluate(ICONS)
    assert icons, "the page names no favicon"
    assert off_server(icons, server) == [], f"the favicon is fetched off the server: {icons}"
    assert off_server(requests, server) == [], "requests off the server"
    fonts = [url for url in requests if "MaterialSymbols" in url]  # the sidebar's icons: the bundled font
    assert fonts and off_server(fonts, server) == [], f"the icon font was not loaded from the app: {requests}"


@pytest.mark.slow  # quick representative: test_the_start_page_asks_nothing_of_a_third_party (one page)
def test_every_page_and_a_presented_lesson_stay_on_the_server(server: str, recorded) -> None:
    tab, requests = recorded
    tab.goto(server)
    settle(tab)
    seen = {}
    for title in PAGES:
        open_page(tab, title)
        seen[title] = tab.evaluate(ICONS)
    name = next(iter(load_lessons()[0]))
    tab.goto(f"{server}/?lesson={name}&step=1&present=1")
    settle(tab)
    tab.get_by_role("button", name="Next").click()
    settle(tab)
    seen["lesson"] = tab.evaluate(ICONS)
    assert {title: off_server(icons, server) for title, icons in seen.items() if off_server(icons, server)} == {}
    assert off_server(requests, server) == [], "requests off the server"
    assert len(requests) > 20  # the walk was recorded (scripts, styles, fonts, the media its charts need)

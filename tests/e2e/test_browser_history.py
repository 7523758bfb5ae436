"""End to end: Back and Forward walk the pages and views a person visited, one history entry each (ui.address).

Before, a page visit wrote its link into the address one parameter at a time, each write a history entry
(about 16 a visit); Back restored half-written links and followed them, to Train with a config no one set.
Here every navigation adds exactly one entry, holding the whole link, and Back and Forward land on each
page and view in turn, with the selected run unchanged. A first visit to a bare address whose script comes late
still leaves two entries (the known limit of docs/links.md, held as an expected failure).
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from lengen.share import MAIN_KEYS
from tests.helpers.browser import MAIN, choose_tab, open_page, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

WALK = ("Attention", "Carrier", "Dilution", "Compare", "Theory")  # from Start, five pages
# The code of the elements that run a script (st.html's, a component's): held back this long on a first visit,
# as a loaded machine held it back, so the first run's link is ready before the script that keeps it from pushing.
LATE_SCRIPT = re.compile(r"/static/js/(Html|BidiComponent)\.[^/]*\.js$")
LATE_SECONDS = 6
PATHS = {"Start": "/", "Attention": "/attention", "Carrier": "/carrier", "Dilution": "/dilution",
         "Compare": "/compare", "Theory": "/theory"}


@pytest.fixture
def tab(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(server)
    settle(page)
    yield page
    context.close()


def entries(tab) -> int:
    return tab.evaluate("history.length")


def where(tab) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(tab.url)
    return parts.path, parse_qs(parts.query)


def run_id(tab) -> str:
    return tab.locator('[data-testid="stSidebar"] code').first.inner_text()


def assert_whole_link_on(tab, title: str, selected: str) -> None:
    """The tab shows page `title`, its address holds the whole selection, and the selected run is `selected`."""
    path, query = where(tab)
    assert path == PATHS[title], (title, tab.url)
    assert set(MAIN_KEYS) <= set(query), f"{title}: a link with settings missing: {tab.url}"
    assert run_id(tab) == selected, (title, run_id(tab), selected)
    body = tab.locator(MAIN).inner_text()
    assert "not trained here yet" not in body and "cannot be opened" not in body, body[:400]


def test_back_and_forward_walk_five_pages_one_entry_each(tab) -> None:
    selected = run_id(tab)
    assert_whole_link_on(tab, "Start", selected)  # the first page's address holds its link too
    counts = [entries(tab)]
    for title in WALK:
        open_page(tab, title)
        counts.append(entries(tab))
        assert_whole_link_on(tab, title, selected)
    assert [b - a for a, b in zip(counts, counts[1:])] == [1] * len(WALK), counts  # one entry per page visited
    visited = ("Start", *WALK)
    for title in reversed(visited[:-1]):  # Back five times: Compare, Dilution, Carrier, Attention, Start
        tab.go_back()
        settle(tab)
        assert_whole_link_on(tab, title, selected)
    assert entries(tab) == counts[-1]  # Back added nothing
    for title in visited[1:3]:  # and Forward again: Attention, Carrier
        tab.go_forward()
        settle(tab)
        assert_whole_link_on(tab, title, selected)
    assert entries(tab) == counts[-1]


@pytest.mark.slow  # a Theory tab walked back (about 20 s); quick representative: the five-page walk above
def test_a_view_changed_is_one_entry_and_back_restores_it(tab) -> None:
    open_page(tab, "Theory")
    before = entries(tab)
    choose_tab(tab, "Glossary")
    assert entries(tab) == before + 1
    assert where(tab)[1]["section"] == ["glossary"]
    choose_tab(tab, "RASP-L (C9)")
    assert entries(tab) == before + 2
    tab.go_back()
    settle(tab)
    assert where(tab)[1]["section"] == ["glossary"]
    assert tab.locator(MAIN).get_by_role("tab", name="Glossary", exact=True).get_attribute("aria-selected") == "true"
    tab.go_back()
    settle(tab)
    assert where(tab)[1].get("section", ["derivations"]) == ["derivations"]


@pytest.mark.slow  # a lesson's step walked back (about 15 s); quick representative: the five-page walk above
def test_a_lesson_step_is_one_entry_and_back_returns_to_it(browser, server) -> None:
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    tab = context.new_page()
    tab.goto(f"{server}/?lesson=why-rope-generalises&step=1&present=1")
    settle(tab)
    before = entries(tab)
    tab.locator(MAIN).get_by_role("button", name="Next").click()
    settle(tab)
    assert where(tab)[1]["step"] == ["2"] and entries(tab) == before + 1
    tab.go_back()
    settle(tab)
    query = where(tab)[1]
    assert query["step"] == ["1"] and query.get("present") == ["1"], tab.url
    assert tab.locator(MAIN).get_by_role("button", name="Back").is_disabled()  # step 1 of the lesson is drawn
    context.close()


@pytest.mark.slow  # 17 s (it holds the script back 6 s); the five-page walk is the quick representative
@pytest.mark.xfail(reason="known limit (docs/links.md): the first run's link is written before a late script", strict=False)
def test_a_first_visit_to_a_bare_address_leaves_one_entry_even_when_its_script_comes_late(browser, server) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    plain = context.new_page()
    plain.goto(f"{server}/_stcore/health")  # a page that writes no link: what a visit alone leaves
    made = entries(plain)
    tab = context.new_page()
    tab.route(LATE_SCRIPT, lambda route: (time.sleep(LATE_SECONDS), route.continue_()))
    tab.goto(server)
    tab.wait_for_function("() => location.search.length > 1", timeout=240_000, polling=200)
    settle(tab)
    assert_whole_link_on(tab, "Start", run_id(tab))
    assert entries(tab) == made, f"the first visit left {entries(tab) - made + 1} entries: {tab.url}"
    context.close()

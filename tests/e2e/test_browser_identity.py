"""End to end: a run keeps its identity from page to page, and every page opens from its own link.

Two look-alike runs are stored before any page opens: a 1-layer, 2-head shift run and a single-head
retrieval run, both RoPE, k = 5, L = 16, seed 0 (30 steps each). Their picker labels were once the
same string, and a selector's value travels by label, so clicking from page to page after opening
the shift run by link selected the retrieval run. Screenshots go to `artifacts/screenshots/identity-*.png`.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from lengen.presets import preset_ids, transformer_presets
from lengen.share import config_to_query
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from tests.helpers.browser import SHOTS, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

RETRIEVAL = with_changes(RunConfig(), offset=5, train_length=16, seed=0, steps=30)
SHIFT = with_changes(RETRIEVAL, task="shift", n_layers=1, n_heads=2)
PAGES = ["Start", "Train", "Attention", "Carrier", "Dilution", "Compare", "Transformer", "Theory"]
ROPE, LINEAR = preset_ids()["RoPE"], preset_ids()["RoPE + linear attention"]
TRANSFORMER = transformer_presets()["Transformer RoPE"]


@pytest.fixture(scope="module")
def look_alikes() -> dict[str, str]:
    """Both runs in the server's store (`LENGEN_HOME`, shared with this process), retrieval first."""
    store = RunStore()
    for config in (RETRIEVAL, SHIFT):
        if not store.exists(config.run_id()):
            store.save(train(config, "cpu"))
    return {"retrieval": RETRIEVAL.run_id(), "shift": SHIFT.run_id()}


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    yield context
    context.close()


def sidebar(tab) -> str:
    return tab.locator('[data-testid="stSidebar"]').inner_text()


def query(tab) -> dict[str, list[str]]:
    return parse_qs(urlsplit(tab.url).query)


def chips(tab) -> list[str]:
    """The runs Compare's picker shows as chosen (once it shows any: it is redrawn as the page settles)."""
    tags = tab.locator('[data-testid="stMultiSelect"] [data-tag-index]')
    tags.first.wait_for(timeout=30_000)
    return tags.evaluate_all("tags => tags.map(tag => tag.getAttribute('aria-label'))")


def assert_no_traceback(tab) -> None:
    assert not tab.locator('[data-testid="stException"]').count()
    assert "Traceback" not in tab.locator("body").inner_text()


@pytest.mark.slow  # every page in chromium (about a minute); quick: each page opens from its own link (below) and
# tests/app/test_identity.py walks every page in the harness
def test_the_run_opened_by_link_stays_selected_on_every_page(server, context, look_alikes) -> None:
    shift = look_alikes["shift"]
    tab = context.new_page()
    tab.goto(f"{server}/?{urlencode(config_to_query(SHIFT))}")
    tab.get_by_text(f"Run id: {shift}").wait_for(timeout=120_000)
    settle(tab)
    for title in PAGES:
        tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title).click()
        settle(tab)
        assert_no_traceback(tab)
        assert f"Run id: {shift}" in sidebar(tab), title
        assert query(tab)["task"] == ["shift"] and query(tab)["layers"] == ["1"], title
    tab.screenshot(path=SHOTS / "identity-shift-run-after-every-page.png", full_page=True)


LINKS = [  # page path, link, what must come back in the address bar (the page read it and wrote it back)
    ("", {"run": "SHIFT"}, {"task": ["shift"], "heads": ["2"]}),
    ("train", {"run": "RETRIEVAL"}, {"task": ["retrieval"], "offset": ["5"]}),
    ("attention", {"run": ROPE, "lengths": "16,128", "trace": "128"}, {"lengths": ["16,128"], "trace": ["128"]}),
    ("carrier", {"run": ROPE, "search": "4096"}, {"search": ["4096"]}),
    ("dilution", {"run": ROPE, "longest": "1024", "samples": "64"}, {"longest": ["1024"], "samples": ["64"]}),
    ("compare", {"compare": [LINEAR, ROPE], "longest": "256", "samples": "64", "scaled": "false"},
     {"compare": [LINEAR, ROPE], "longest": ["256"], "samples": ["64"], "scaled": ["false"]}),
    ("transformer", {"run": TRANSFORMER, "head": "L1H0", "samples": "16"}, {"head": ["L1H0"], "samples": ["16"]}),
    ("theory", {"run": ROPE, "t": "40", "u": "7"}, {"t": ["40"], "u": ["7"]}),
]


QUICK_LINKS = ("", "dilution")  # the fast tier's representatives; every other page's link is slow (tens of seconds each)


@pytest.mark.parametrize("path, link, expected", [
    pytest.param(*case, marks=() if case[0] in QUICK_LINKS else pytest.mark.slow) for case in LINKS
], ids=[path or "start" for path, _, _ in LINKS])
def test_each_page_opens_from_its_own_link(server, context, look_alikes, path, link, expected) -> None:
    link = {k: look_alikes[v.lower()] if v in ("SHIFT", "RETRIEVAL") else v for k, v in link.items()}
    tab = context.new_page()  # a fresh context per test: a person pasting the link into a new window
    tab.goto(f"{server}/{path}?{urlencode(link, doseq=True)}")
    tab.locator("[data-testid=\"stSidebar\"]").get_by_text("Run id:").wait_for(timeout=120_000)
    settle(tab)
    assert_no_traceback(tab)
    assert "cannot be opened" not in tab.locator("body").inner_text()
    shown = query(tab)
    assert {key: shown.get(key) for key in expected} == expected
    if "run" in link:
        assert f"Run id: {link['run']}" in sidebar(tab)
    tab.screenshot(path=SHOTS / f"identity-link-{path or 'start'}.png", full_page=True)


@pytest.mark.slow  # a minute on a busy machine; the bad-id link below stays in the fast tier
def test_compare_from_its_link_shows_exactly_those_two_runs(server, context, look_alikes) -> None:
    tab = context.new_page()
    link = {"compare": [look_alikes["shift"], LINEAR], "longest": "256", "samples": "64", "scaled": "false"}
    tab.goto(f"{server}/compare?{urlencode(link, doseq=True)}")
    tab.get_by_text("Key numbers", exact=True).wait_for(timeout=180_000)
    settle(tab)
    assert_no_traceback(tab)
    chosen = chips(tab)
    assert len(chosen) == 2
    assert "shift" in chosen[0] and "1 layer × 2 heads" in chosen[0] and chosen[0].endswith(f"#{look_alikes['shift'].rsplit('-', 1)[-1][:6]}")
    assert chosen[1] == "Preset: RoPE + linear attention"
    assert not tab.get_by_role("switch", name="Scale each carrier to its peak").is_checked()
    main = tab.locator('[data-testid="stMain"]').inner_text()
    assert "2^8 = 256" in main
    assert query(tab)["compare"] == [look_alikes["shift"], LINEAR]
    tab.screenshot(path=SHOTS / "identity-compare-two-runs.png", full_page=True)


def test_compare_link_with_a_bad_id_names_it_and_keeps_the_rest(server, context) -> None:
    tab = context.new_page()
    tab.goto(f"{server}/compare?compare={ROPE}&compare=not-a-run&samples=64&longest=128")
    tab.get_by_text("Key numbers", exact=True).wait_for(timeout=180_000)
    settle(tab)
    assert_no_traceback(tab)
    assert "names the run 'not-a-run', which is not stored here" in tab.locator('[data-testid="stMain"]').inner_text()
    assert chips(tab) == ["Preset: RoPE"]
    assert query(tab)["compare"] == [ROPE] and query(tab)["samples"] == ["64"]

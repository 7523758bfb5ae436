"""End to end (issue 26): two runs that differ only in their seed are told apart at a glance. On Compare both
chosen runs' chips lie whole inside the run box (it wraps, at 1,400 and 1,024 px); in the sidebar the closed
picker shows the part of the label that differs without cutting it, and the open list shows every label whole.
Screenshots go to `artifacts/screenshots/readouts-*.png`."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from tests.helpers.browser import SHOTS, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

SEED_0 = with_changes(RunConfig(), offset=5, seed=0, steps=30)
SEED_1 = with_changes(SEED_0, seed=1)
# The width of `text` in the font of element `e` (a canvas measures it as the browser draws it).
TEXT_WIDTH = """(e, text) => { const c = document.createElement('canvas').getContext('2d');
    c.font = getComputedStyle(e).font; return c.measureText(text).width; }"""


@pytest.fixture(scope="module")
def twins() -> list[str]:
    """Two runs in the server's store (`LENGEN_HOME`, shared with this process) that differ in seed alone."""
    store = RunStore()
    for config in (SEED_0, SEED_1):
        if not store.exists(config.run_id()):
            store.save(train(config, "cpu"))
    return [SEED_0.run_id(), SEED_1.run_id()]


def inside(inner: dict, outer: dict) -> bool:
    return (inner["x"] >= outer["x"] - 0.5 and inner["y"] >= outer["y"] - 0.5
            and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
            and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5)


@pytest.mark.parametrize("width,height", [(1400, 900), (1024, 768)])
def test_compares_run_box_shows_both_chosen_runs_whole(server, browser, twins, width, height) -> None:
    tab = browser.new_page(viewport={"width": width, "height": height})
    tab.goto(f"{server}/compare?{urlencode({'compare': twins, 'longest': '128', 'samples': '64'}, doseq=True)}")
    settle(tab)
    box = tab.locator('[data-testid="stMultiSelect"]').first.locator('[data-rac][role="group"]').first
    tags = tab.locator('[data-testid="stMultiSelect"]').first.locator("[data-tag-index]")
    tags.nth(1).wait_for(timeout=60_000)  # the picker is drawn again as the page settles
    assert tags.count() == 2
    outer = box.bounding_box()
    for i in range(2):
        chip, text = tags.nth(i), tags.nth(i).locator("span").first
        assert inside(chip.bounding_box(), outer), (i, chip.bounding_box(), outer)
        assert text.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), chip.inner_text()  # no ellipsis
    labels = [tags.nth(i).inner_text() for i in range(2)]
    assert labels[0] != labels[1] and labels[0][:30] != labels[1][:30]
    tab.screenshot(path=SHOTS / f"readouts-compare-run-box-{width}.png")
    tab.close()


def test_the_sidebar_picker_shows_what_differs_uncut(server, browser, twins) -> None:
    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    tab.goto(f"{server}/dilution?run={twins[1]}")
    settle(tab)
    picker = tab.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"] input[role="combobox"]').first
    label = picker.input_value()
    differs = label.split(" · ")[0]
    assert "seed 1" in differs, label  # the seed is what tells the twins apart: it is in the label's first part
    room = picker.evaluate("e => e.clientWidth - parseFloat(getComputedStyle(e).paddingLeft) "
                           "- parseFloat(getComputedStyle(e).paddingRight)")
    # What tells the twins apart (up to their seed) is never cut. Settings after it (task, layout) are named when
    # other runs in this store differ in them, and may run past a narrow box: the caption below shows it whole.
    through_seed = differs[:differs.index("seed 1") + len("seed 1")]
    assert picker.evaluate(TEXT_WIDTH, through_seed) <= room, (through_seed, room)
    caption = tab.locator('[data-testid="stSidebar"] [data-testid="stCaptionContainer"]', has_text=differs).first
    assert caption.evaluate("e => [e, ...e.querySelectorAll('*')].every(x => x.scrollWidth <= x.clientWidth + 1)")
    picker.click()
    options = tab.locator('[role="listbox"] [role="option"]')
    options.first.wait_for(timeout=30_000)
    twin_options = [o for o in options.all() if "seed 0" in o.inner_text() or "seed 1" in o.inner_text()]
    assert twin_options
    for option in twin_options:  # every label whole in the open list: wrapped, never cut
        assert option.evaluate("e => [e, ...e.querySelectorAll('*')].every(x => x.scrollWidth <= x.clientWidth + 1)"), \
            option.inner_text()
    tab.screenshot(path=SHOTS / "readouts-sidebar-open.png")
    tab.close()

"""End to end for the Compare, Transformer and Theory pages: `streamlit run app.py` (the server
fixture in conftest.py) driven by Debian's chromium; charts drawn, screenshots in
`artifacts/screenshots/`. One browser session, so the selected run follows from page to page. The
Transformer RoPE preset's page is also read for its section on where absolute position comes from: the
sink, the probe against its untrained baseline, the interventions and the mask's share, each drawn as wide
as the main column with its caption from the run's numbers.
"""

from __future__ import annotations

import pytest

from tests.helpers.browser import CHART, MAIN, SHOTS, check_and_shoot, choose_tab, open_page, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect


@pytest.fixture(scope="module")
def tab(open_tab):
    page = open_tab(4000)
    page.get_by_role("heading", name="The claims, and where to see them").wait_for(timeout=120_000)
    return page


ABSOLUTE_TITLES = ("The sink", "Position probe", "The mask's share")  # the section's charts, by their titles' start
SECTION_CHARTS = """(titles) => [...document.querySelectorAll('.js-plotly-plot')]
    .map(chart => [chart.querySelector('.gtitle')?.textContent ?? '', chart.getBoundingClientRect().width])
    .filter(([title]) => titles.some(t => title.startsWith(t)))"""


def absolute_section_is_readable(page) -> None:
    """The Transformer RoPE preset's absolute-position section (its probes ship with the preset)."""
    main = page.locator(MAIN)
    main.get_by_role("heading", name="Where absolute position comes from").wait_for(timeout=240_000)
    expect(main).to_contain_text("The interventions", timeout=240_000)
    drawn = page.evaluate(SECTION_CHARTS, list(ABSOLUTE_TITLES))
    for title in ABSOLUTE_TITLES:
        assert any(shown.startswith(title) for shown, _ in drawn), (title, drawn)
    assert all(width >= 600 for _, width in drawn), drawn  # each as wide as the main column
    shown, whole = main.inner_text(), main.text_content()  # the captions' leads; their rest, folded, too
    assert "at L = 64 it beats its untrained baseline" in shown and "No head reads the sink" in shown
    assert "At L = 64, the probe beats its untrained baseline" in whole and "as relative logits must" in whole
    assert main.locator('[data-testid="stDataFrame"]').filter(has_text="intervention").count() == 1
    problems = check_and_shoot(page, "absolute-transformer-rope")
    assert not problems, problems


def charts_drawn(page, at_least: int) -> None:
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= {at_least}", timeout=240_000)
    assert not page.locator('[data-testid="stException"]').count()


def test_start_page_has_its_picture(tab) -> None:
    settle(tab)
    charts_drawn(tab, 1)
    tab.screenshot(path=SHOTS / "start-picture.png", full_page=True)


def test_compare_overlays_the_presets(tab) -> None:
    open_page(tab, "Compare")
    # Wait for the table itself, not for a fixed time: on a slow machine the click's rerun may not have begun
    # when settle() looks for the running-status widget (500 ms after the click), and the three charts are
    # drawn before the script reaches "Key numbers" (the page computes the comparisons first, then draws the
    # charts, then the table), so neither wait alone meant the table was there.
    main = tab.locator(MAIN)
    main.get_by_role("heading", name="Compare runs").wait_for(timeout=240_000)
    main.get_by_role("heading", name="Key numbers").wait_for(timeout=240_000)
    main.get_by_role("button", name="Download key numbers (CSV)").wait_for(timeout=240_000)  # after the table
    settle(tab)
    charts_drawn(tab, 3)
    assert "Key numbers" in main.inner_text()
    tab.screenshot(path=SHOTS / "compare-presets.png", full_page=True)


def test_theory_checks_equivariance_of_the_rope_preset(tab) -> None:
    open_page(tab, "Theory")
    tab.locator(".katex").first.wait_for(timeout=30_000)  # the derivations are typeset, in the first tab
    assert not tab.locator(MAIN).get_by_text("4. Live check").count()  # the other tabs wait until chosen
    choose_tab(tab, "Live check (C3)")
    charts_drawn(tab, 1)
    # a retrying check, not one read: on a slow machine the metric may still be the previous page's
    expect(tab.locator('[data-testid="stMetric"]').nth(1)).to_contain_text("yes", timeout=240_000)
    tab.screenshot(path=SHOTS / "theory-rope-preset.png", full_page=True)


def test_a_glossary_link_opens_theory_at_its_glossary_tab_scrolled_to_the_word(browser, server) -> None:
    reader = browser.new_page(viewport={"width": 1400, "height": 900})  # a term link opens a new browser tab
    reader.goto(f"{server}/theory?term=near-recurrence#near-recurrence")
    heading = reader.locator("#near-recurrence")
    heading.wait_for(timeout=240_000)
    settle(reader)
    selected = reader.locator(MAIN).get_by_role("tab", selected=True)
    assert selected.inner_text().strip() == "Glossary"
    expect(heading).to_be_in_viewport(timeout=30_000)
    assert "section=glossary" in reader.url and "term=" not in reader.url
    reader.screenshot(path=SHOTS / "theory-glossary-link.png")
    reader.close()


@pytest.mark.slow  # both transformer presets' pages; the identity walk and tests/app/test_more_pages.py open it quickly
def test_transformer_page_for_both_presets(tab) -> None:
    open_page(tab, "Transformer")
    expect(tab.locator(MAIN)).to_contain_text("minimal single head", timeout=240_000)  # the page, not the last one
    tab.get_by_role("button", name="Open Transformer RoPE").first.click()
    tab.get_by_text("rope encoding, softmax attention").wait_for(timeout=120_000)  # the run summary
    settle(tab)
    charts_drawn(tab, 7 + len(ABSOLUTE_TITLES))
    tab.screenshot(path=SHOTS / "transformer-rope-preset.png", full_page=True)
    absolute_section_is_readable(tab)
    tab.get_by_role("button", name="Open Transformer learned").first.click()
    tab.get_by_text("learned encoding, softmax attention").wait_for(timeout=120_000)  # the run summary
    settle(tab)
    charts_drawn(tab, 7)
    assert "0 of" not in tab.locator('[data-testid="stMetric"]').nth(1).inner_text()  # pinned heads
    tab.screenshot(path=SHOTS / "transformer-learned-preset.png", full_page=True)
    open_page(tab, "Theory")
    choose_tab(tab, "Live check (C3)")
    charts_drawn(tab, 1)
    expect(tab.locator('[data-testid="stMetric"]').nth(1)).to_contain_text("no", timeout=240_000)
    tab.screenshot(path=SHOTS / "theory-transformer-learned.png", full_page=True)

"""A student's path through the lab, in chromium: train a run that is not the default, visit every page,
come back to Train (nothing reset), train a second run, and compare the two.

Issue 26 found the Train form back at its minimums (offset 1, steps 0) after any page switch; the app
test (tests/app/test_train_form.py) walks the pages in Streamlit's test harness, this one in a real
browser, where the widgets are redrawn by the front end. The first visit of each analysis page to a run
just trained is timed in the browser and written to `artifacts/first-visits.json` (docs/serving.md has
the figures and the target); the bound asserted here only tells "read what the training stored" from
"measured again on the visit", on a machine shared with the other tests.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.helpers.browser import CHART, ROOT, SHOTS, open_page, settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

PAGES = ["Start", "Attention", "Carrier", "Dilution", "Compare", "Transformer", "Theory", "Sweeps", "Lessons"]
TIMED = {"Dilution": 2, "Attention": 1, "Carrier": 1, "Compare": 1}  # page -> charts its first screen draws
# A first visit that recomputes (the evaluation to 2^16 at 256 samples, the predicted horizon) took 60 s on
# this machine (issue 26); one that reads the stored numbers takes a few. The bound separates the two with
# room for a CI machine running other tests beside this one.
RECOMPUTED_SECONDS = 30.0
FIRST = {"Offset k": "5", "Vocabulary V": "24", "Training length": "24", "Steps": "300", "Seed": "7"}
# Every input of the form, as the browser shows it: number inputs and selects by their label, radios by
# the option checked.
FORM_VALUES = """() => {
    const main = document.querySelector('[data-testid="stMain"]');
    const values = {};
    for (const box of main.querySelectorAll('[data-testid="stNumberInput"]'))
        values[box.querySelector('label').innerText] = box.querySelector('input').value;
    for (const box of main.querySelectorAll('[data-testid="stSelectbox"]')) {
        const label = box.querySelector('label').innerText;
        values[label] = box.innerText.replace(label, '').trim();
    }
    for (const box of main.querySelectorAll('[data-testid="stRadio"]')) {
        const checked = box.querySelector('input:checked');
        values[box.querySelector('label').innerText] = checked ? checked.closest('label').innerText : null;
    }
    for (const box of main.querySelectorAll('[data-testid="stCheckbox"]'))
        values[box.innerText] = box.querySelector('input').checked;
    return values;
}"""


@pytest.fixture(scope="module")
def tab(server, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    yield context.new_page()
    context.close()


def form(tab) -> dict:
    return tab.evaluate(FORM_VALUES)


def fill(tab, label: str, value: str) -> None:
    box = tab.locator('[data-testid="stMain"]').get_by_role("spinbutton", name=label, exact=True)
    box.fill(value)
    box.press("Tab")
    settle(tab)


def choose(tab, label: str, option: str) -> None:
    tab.locator('[data-testid="stMain"]').get_by_role("combobox", name=label).click()
    tab.get_by_role("option", name=option, exact=True).click()
    settle(tab)


def train(tab) -> str:
    """Press Train, wait for the run to be saved; its id, as the sidebar names it."""
    tab.get_by_role("button", name="Train", exact=True).click()
    tab.get_by_text("saved and selected").wait_for(timeout=600_000)
    settle(tab)
    found = re.search(r"Run id: (\S+)", tab.locator('[data-testid="stSidebar"]').inner_text())
    assert found, "the sidebar names no run after training"
    return found.group(1)


def test_a_student_trains_visits_every_page_comes_back_and_compares_two_runs(tab, server) -> None:
    tab.goto(server)
    settle(tab)
    open_page(tab, "Train")
    for label, value in FIRST.items():
        fill(tab, label, value)
    chosen = form(tab)
    assert {label: chosen[label] for label in FIRST} == FIRST, chosen  # the form took every value
    first = train(tab)
    assert form(tab) == chosen  # training changed nothing in the form

    seconds = {}
    for title in PAGES:
        started = time.monotonic()
        open_page(tab, title)
        if title in TIMED:
            tab.wait_for_function("([selector, n]) => document.querySelectorAll(selector).length >= n",
                                  arg=[CHART, TIMED[title]], timeout=600_000)
            seconds[title] = round(time.monotonic() - started, 2)
        main = tab.locator('[data-testid="stMain"]')
        assert not main.locator('[data-testid="stException"]').count(), title
        assert "Traceback" not in main.inner_text(), title
        if title != "Lessons":  # the lessons' index shows no run: each lesson picks its own
            assert f"Run id: {first}" in tab.locator('[data-testid="stSidebar"]').inner_text(), title
        tab.screenshot(path=SHOTS / f"student-{title.lower()}.png")
        open_page(tab, "Train")
        assert form(tab) == chosen, f"the Train form changed after a visit to {title}"
        assert "Not a valid configuration" not in tab.locator('[data-testid="stMain"]').inner_text(), title
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "first-visits.json").write_text(json.dumps({"run": first, "seconds": seconds}, indent=1))
    slow = {title: s for title, s in seconds.items() if s > RECOMPUTED_SECONDS}
    assert not slow, f"first visits that measured the run again instead of reading it: {slow}"

    choose(tab, "Positional encoding", "learned")
    second = train(tab)
    assert second != first
    assert form(tab) == {**chosen, "Positional encoding": "learned"}

    open_page(tab, "Compare")
    picker = tab.get_by_role("combobox", name="Runs")
    for run_id in (first, second):
        tag = run_id.rsplit("-", 1)[-1][:6]  # a label ends with the start of the run's config hash
        if not tab.locator(f'[data-testid="stMultiSelect"] [data-tag-index][aria-label*="{tag}"]').count():
            picker.click()
            tab.get_by_role("option", name=re.compile(re.escape(tag))).click()
            tab.keyboard.press("Escape")
            settle(tab)
    main = tab.locator('[data-testid="stMain"]')
    tab.wait_for_selector(CHART, timeout=600_000)
    assert not main.locator('[data-testid="stException"]').count()
    query = tab.url.split("?", 1)[-1]
    assert first in query and second in query  # the link names both runs compared
    tab.screenshot(path=SHOTS / "student-compare-both.png", full_page=True)

"""End to end: the Train form follows a link to a stored run, and settings that name a stored run offer a seed of
one's own in one click (issue 40; AppTest twins in tests/app/test_train_form.py)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from lengen.presets import PRESETS
from lengen.share import config_to_query
from tests.helpers.browser import MAIN, SHOTS, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")


@pytest.mark.slow  # chromium, about 20 s; quick representatives: tests/app/test_train_form.py (the link, the offer)
def test_a_reloaded_train_link_shows_its_run_and_one_click_takes_a_new_seed(browser, server) -> None:
    learned = PRESETS["Learned (APE)"]
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    tab = context.new_page()
    tab.goto(f"{server}/train?{urlencode(config_to_query(learned))}")
    settle(tab)
    main = tab.locator(MAIN)
    main.get_by_label("Seed", exact=True).wait_for(timeout=60_000)  # the form's widgets are drawn after the run
    assert main.get_by_role("combobox", name="Positional encoding").input_value() == "learned"
    seed = main.get_by_label("Seed", exact=True)
    assert seed.input_value() == str(learned.train.seed)
    assert "Train opens that run" in main.inner_text()
    tab.screenshot(path=SHOTS / "train-stored-run.png")
    main.get_by_role("button", name=f"Use seed {learned.train.seed + 1}").click()
    settle(tab)
    assert seed.input_value() == str(learned.train.seed + 1)
    assert "Train opens that run" not in main.inner_text()
    tab.reload()  # the link still names the selected (stored) run: the form shows it again
    settle(tab)
    main.get_by_label("Seed", exact=True).wait_for(timeout=60_000)
    assert main.get_by_label("Seed", exact=True).input_value() == str(learned.train.seed)
    context.close()

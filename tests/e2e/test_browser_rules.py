"""End to end for inference rules (issue 17) in Debian's chromium at 1280 px: log-n picked on Dilution
flattens the RoPE preset's curve beside the unmodified one; PI and NTK picked on Carrier reshape s(Δ).
Screenshots of each section in artifacts/screenshots/rules-*.png."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from lengen.presets import PRESETS, preset_ids
from tests.helpers.browser import MAIN, SHOTS, settle

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")

WIDTH = 1280
TASK = PRESETS["RoPE"].task


def pick(tab, selector: str, *rules: str) -> None:
    """Choose `rules` in the multiselect labelled `selector`, one option at a time, then close it."""
    for rule in rules:
        tab.get_by_role("combobox", name=selector).click()
        tab.get_by_role("option", name=re.compile(f"^{re.escape(rule)}:")).click()
        tab.keyboard.press("Escape")
        settle(tab, 600_000)


def shoot(tab, heading: str, name: str, height: int) -> None:
    """A screenshot of the page from `heading` down, `height` px tall, the full width (the tab is tall
    enough that nothing scrolls: Streamlit's main area scrolls inside itself, past a page screenshot's reach)."""
    top = tab.get_by_role("heading", name=heading).bounding_box()["y"]
    tab.screenshot(path=SHOTS / f"{name}.png", clip={"x": 0, "y": top - 10, "width": WIDTH, "height": height})


def query(tab) -> dict[str, list[str]]:
    return parse_qs(urlsplit(tab.url).query)


@pytest.mark.slow  # the attention link below is the fast tier's rule in a browser (and tests/app/test_rule_selector.py)
def test_log_n_on_dilution_draws_its_curves_beside_the_unmodified_run(server, browser) -> None:
    tab = browser.new_page(viewport={"width": WIDTH, "height": 6000})
    tab.goto(f"{server}/dilution?longest=4096&samples=256")
    tab.get_by_role("heading", name="Inference rules: the same weights read another way").wait_for(timeout=300_000)
    settle(tab, 600_000)
    pick(tab, "Inference rules", "log-n")
    tab.get_by_text("Accuracy under each rule").first.wait_for(timeout=300_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert re.search(r"log-n keeps p at 0\.\d+ at 4,096 \(256×\) where the unmodified run falls to 0\.\d+", text), text
    assert query(tab)["rules"] == ["log-n"]
    shoot(tab, "Inference rules: the same weights read another way", "rules-dilution", 1900)
    tab.close()


@pytest.mark.slow  # the attention link below is the fast tier's rule in a browser (and tests/app/test_rule_selector.py)
def test_pi_and_ntk_on_carrier_reshape_the_carrier(server, browser) -> None:
    tab = browser.new_page(viewport={"width": WIDTH, "height": 5000})
    tab.goto(f"{server}/carrier")
    tab.get_by_role("heading", name="Carrier rules: s(Δ) read at a longer length").wait_for(timeout=300_000)
    settle(tab)
    pick(tab, "Carrier rules", "pi", "ntk")
    tab.get_by_role("textbox", name="ntk scale α").fill("4")
    tab.keyboard.press("Enter")
    length = 8 * TASK.train_length
    tab.get_by_text(f"ntk:4 (α = 4 at L = {length:,})").first.wait_for(timeout=300_000)  # the rerun with α = 4
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert f"pi (s = 8 at L = {length:,}): the peak moves from Δ = {TASK.offset} to Δ = {8 * TASK.offset}" in text, text
    assert f"ntk:4 (α = 4 at L = {length:,})" in text
    assert query(tab)["rules"] == ["pi,ntk:4"]
    shoot(tab, "Carrier rules: s(Δ) read at a longer length", "rules-carrier", 1300)
    tab.close()


@pytest.mark.slow  # the attention link below is the fast tier's rule in a browser (and tests/app/test_rule_selector.py)
def test_a_compare_link_with_rules_opens_with_them_a_panel_per_run(server, browser) -> None:
    runs = [preset_ids()[name] for name in ("RoPE", "RoPE + linear attention", "Learned (APE)")]
    tab = browser.new_page(viewport={"width": WIDTH, "height": 7000})
    tab.goto(f"{server}/compare?{'&'.join(f'compare={r}' for r in runs)}&rules=log-n,pi&longest=1024&samples=128")
    tab.get_by_text("Accuracy under each rule, per run").first.wait_for(timeout=600_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert "RoPE + linear attention: log-n skipped: log-n scales the logits before the softmax" in text, text
    assert "Learned (APE): pi skipped: pi is not defined for learned" in text
    assert re.search(r"RoPE: log-n keeps p at 0\.\d+ at 1,024 \(64×\)", text)
    assert query(tab)["rules"] == ["log-n,pi"]
    shoot(tab, "Inference rules on each run", "rules-compare", 1700)
    tab.close()


def test_an_attention_link_with_a_rule_draws_its_map_beside_the_unmodified_one(server, browser) -> None:
    length = 8 * TASK.train_length
    tab = browser.new_page(viewport={"width": WIDTH, "height": 8000})
    tab.goto(f"{server}/attention?rules=log-n&rule-length={length}")
    tab.get_by_text(f"log-n · L = {length}").first.wait_for(timeout=300_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert re.search(rf"log-n at L = {length}: the last query attends most to key {length - 1 - TASK.offset} = t − k", text)
    assert re.search(r"The last query's weight on its target goes from 0\.\d\d to 0\.\d\d under log-n", text)
    shoot(tab, "The map under an inference rule", "rules-attention", 1900)
    tab.close()


NEW_RULES = "dynamic,ntk-by-parts,longrope:8x8/1x56"  # issue 30: the frequency rules, one with a table


@pytest.mark.slow
def test_the_frequency_rules_on_dilution_carrier_and_compare(server, browser) -> None:
    """dynamic NTK, NTK-by-parts and a LongRoPE table from one link on each page that draws rules: each
    drawn beside the unmodified run, the table kept in the box and the address bar; the table's attention
    map on Attention."""
    tab = browser.new_page(viewport={"width": WIDTH, "height": 6000})
    tab.goto(f"{server}/dilution?longest=1024&samples=256&rules={NEW_RULES}")
    tab.get_by_text("Accuracy under each rule").first.wait_for(timeout=300_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    assert tab.get_by_role("textbox", name="longrope table λ").input_value() == "8x8/1x56"
    text = tab.locator(MAIN).inner_text()
    for label in ("dynamic", "ntk-by-parts", "longrope:8x8/1x56"):
        assert label in text
    assert query(tab)["rules"] == [NEW_RULES]
    shoot(tab, "Inference rules: the same weights read another way", "rules-frequency-dilution", 1900)

    length = 8 * TASK.train_length
    tab.goto(f"{server}/carrier?rules={NEW_RULES}&at={length}&search=4096")
    tab.get_by_text(f"longrope:8x8/1x56 (λ = 1 to 8 at L = {length:,})").first.wait_for(timeout=300_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert f"dynamic (f = 2, α = {2 * 8 - 1} at L = {length:,})" in text, text
    assert f"ntk-by-parts (s = 8 at L = {length:,})" in text
    shoot(tab, "Carrier rules: s(Δ) read at a longer length", "rules-frequency-carrier", 1400)

    runs = [preset_ids()[name] for name in ("RoPE", "Learned (APE)")]
    tab.goto(f"{server}/compare?{'&'.join(f'compare={r}' for r in runs)}&rules={NEW_RULES}&longest=1024&samples=128")
    tab.get_by_text("Accuracy under each rule, per run").first.wait_for(timeout=600_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert "Learned (APE): longrope:8x8/1x56 skipped: longrope rescales RoPE's frequencies" in text, text
    shoot(tab, "Inference rules on each run", "rules-frequency-compare", 1700)

    tab.goto(f"{server}/attention?rules=longrope:8x8/1x56&rule-length={length}")
    tab.get_by_text(f"longrope:8x8/1x56 · L = {length}").first.wait_for(timeout=300_000)
    settle(tab, 600_000)
    assert not tab.locator('[data-testid="stException"]').count()
    text = tab.locator(MAIN).inner_text()
    assert re.search(rf"longrope:8x8/1x56 at L = {length}: the last query attends most to key \d+", text), text
    shoot(tab, "The map under an inference rule", "rules-frequency-attention", 1900)
    tab.close()

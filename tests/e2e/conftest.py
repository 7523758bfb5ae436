"""`streamlit run serve.py` on a free port for the browser tests, healthy before any test starts, and
Debian's chromium opening tabs on it (`open_tab`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from serving import serve_checkout

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The app's address; the server inherits `LENGEN_HOME` (a temp store) from the test session."""
    with serve_checkout() as served:
        yield served["url"]


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, one per test module."""
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def open_tab(server: str, browser) -> Callable[[int], object]:
    """`open_tab(height)`: a tab 1400 px wide on the app's Start page."""

    def open_(height: int):
        tab = browser.new_page(viewport={"width": 1400, "height": height})
        tab.goto(server)
        return tab

    return open_

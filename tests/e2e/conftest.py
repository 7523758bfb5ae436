"""One `streamlit run serve.py` on a free port and one headless chromium per test session (per xdist
worker: each has its own of both), started by the first test that asks for them; `open_tab` opens
tabs on the app's Start page. Every page and context a test module left open is closed after it.

A module that needs a server of its own (a fresh one, another store, a measured one) starts it with
`tests.helpers.serving`; the server here is shared, so what one module trains or sweeps on it is seen
by the next (the run store, `LENGEN_HOME`, was already the session's).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lengen.first_visit import MEASURE_ENV
from tests.helpers.browser import BROWSER_ARGS, CHROMIUM, SHOTS
from tests.helpers.ray_head import ray_head
from tests.helpers.serving import serve_checkout

_LAUNCHED: list = []  # the session's browser, once launched


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """The app's address; the server inherits `LENGEN_HOME` (a temp store) from the test session."""
    with serve_checkout() as served:
        yield served["url"]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """One local Ray head with token authentication for the session (starting one takes many seconds):
    (address, a client's environment). Shared by the Ray sweep and the Ray training pool's tests."""
    if importlib.util.find_spec("ray") is None:  # (not imported here: a client reads its token when it imports Ray)
        pytest.skip("Ray is not installed here (pip install -r requirements-ray.txt)")
    with ray_head(tmp_path_factory.mktemp("ray-home")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def measuring_server() -> Iterator[str]:
    """A server whose trainings measure their runs for the first visit as they save them, as the app's do
    (the suite's own servers do not: tests/conftest.py); shared by the serial modules that time first visits."""
    with serve_checkout(env={MEASURE_ENV: "1"}) as served:
        yield served["url"]


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless, one per session (per xdist worker)."""
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS, headless=True)
        _LAUNCHED.append(launched)
        yield launched
        _LAUNCHED.remove(launched)
        launched.close()


@pytest.fixture(scope="module", autouse=True)
def close_what_the_module_opened() -> Iterator[None]:
    """After each module (its own fixtures torn down first), close the pages and contexts it left open
    in the shared browser, so that no tab keeps a session on the shared server."""
    yield
    for launched in _LAUNCHED:
        for context in list(launched.contexts):
            with contextlib.suppress(Exception):  # already closed, or the browser went away
                context.close()


@pytest.fixture(scope="module")
def open_tab(server: str, browser) -> Callable[[int], object]:
    """`open_tab(height)`: a tab 1400 px wide on the app's Start page."""

    def open_(height: int):
        tab = browser.new_page(viewport={"width": 1400, "height": height})
        tab.goto(server)
        return tab

    return open_

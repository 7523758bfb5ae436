"""AppTest runs the router (app.py) on every run, as a real server does."""

from __future__ import annotations

import pytest
from streamlit.runtime.pages_manager import PagesManager


@pytest.fixture(autouse=True)
def router_runs_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest resets `PagesManager.uses_pages_directory` before each run, and with a `pages/` folder
    beside app.py every run after the first then executes the page file alone (Streamlit's v1
    multipage mode), skipping app.py's `st.navigation` and sidebar. A server sets the flag to False
    at the first `st.navigation` call and keeps it; so do these tests.
    """
    original = PagesManager.__init__

    def init(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)

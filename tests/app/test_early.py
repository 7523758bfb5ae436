"""The cold start's two overlaps (ui.early): the router draws an invisible chart before its imports, so
the browser loads plotly.js meanwhile, and removes it once the page is drawn; serve.py's thread imports
the router's modules while the server starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui import early

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def early_charts(app: AppTest) -> list:
    return [c for c in app.get("plotly_chart") if early.EARLY_KEY in str(c.proto.id)]


def test_the_early_chart_is_gone_once_the_start_page_is_drawn_and_is_not_drawn_again() -> None:
    app = AppTest.from_file(APP, default_timeout=300).run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.session_state[early.LOADED]
    assert not early_charts(app)  # emptied after page.run(): only the page's own chart is left
    assert len(app.main.get("plotly_chart")) == 1  # the Start page's picture
    app.run()
    assert not early_charts(app) and len(app.main.get("plotly_chart")) == 1


def page_place(app: AppTest) -> int:
    """Where the page's own element sits among the main area's elements."""
    return next(i for i, node in app.main.children.items() if getattr(node, "value", None) == "page")


def test_the_early_chart_is_drawn_on_a_first_run_only_in_a_slot_made_on_every_run() -> None:
    script = "from ui import early\nimport streamlit as st\nslot = early.load_plotly_early()\nst.text('page')"
    app = AppTest.from_string(script, default_timeout=60).run()
    assert [c for c in app.get("plotly_chart") if early.EARLY_KEY in str(c.proto.id)]
    first = page_place(app)
    app.run()  # the same session again: the tab has plotly.js; the slot stays, empty, where it was
    assert not app.get("plotly_chart")
    assert page_place(app) == first == 1  # so the browser redraws nothing that did not change


def test_the_early_module_imports_neither_torch_nor_pandas() -> None:
    """It runs before the imports it overlaps: were it to import them, it would overlap nothing."""
    code = "import sys, ui.early; print(sorted({'torch', 'pandas', 'lengen_core'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_serve_imports_the_lab_on_a_thread_the_router_waits_for() -> None:
    code = ("import sys, threading\nfrom ui import early\nearly.import_the_lab()\n"
            "assert any(t.name == 'lengen-import' for t in threading.enumerate())\n"
            "early.wait_for_the_lab()\nprint(all(m in sys.modules for m in early.LAB_MODULES), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["True", "True"]


"""What happens before the lab is imported: the server imports it while it starts, and the first
page has the browser load plotly.js meanwhile.

`import_the_lab` (called by serve.py as the server starts) imports torch, pandas, plotly and the router's
modules on a thread of their own, so the seconds they take overlap the server's start and the
browser's first load instead of following them; the router waits for it (`wait_for_the_lab`) before
it imports the same modules, so no module is imported by two threads at once.

A session's first script run spends seconds importing torch, pandas and the lab's modules before the
first page draws anything, and chromium then spent as long again fetching and evaluating plotly.js
(Streamlit loads it only when a page first draws a plotly chart). `load_plotly_early` draws a tiny
chart, invisible, before those imports, so the browser loads plotly.js on its own core while the
server imports; the router removes it (`done`) once the page's own charts can follow. This module
imports only streamlit and plotly, so it adds nothing to the wait it shortens.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

# The tab's icon (the router's st.set_page_config): a file of the app's own, sent as a data: URL, so no browser
# fetches it elsewhere (a page's `:material/...:` icon would make the favicon a link to fonts.gstatic.com)
FAVICON = Path(__file__).resolve().parent.parent / "assets" / "favicon.svg"
# The router's modules (app.py), and through them torch, pandas and every page's analyses
LAB_MODULES = ("ui.training.pool", "lengen.runtime", "ui.lessons.view", "ui.state", "ui.widgets",
               "ui.runs")
_importing: threading.Thread | None = None
_chart_ready = threading.Event()  # the import thread has imported what a chart needs (pandas, plotly.io)


def import_the_lab() -> None:
    """Import `LAB_MODULES` on a daemon thread, once per process (the router imports them whatever happens)."""
    global _importing
    # The server binds and answers on its main thread meanwhile: hand the interpreter lock on every 1 ms, not
    # Python's 5 ms, as app.py does for the sessions' script threads, so it is not kept waiting behind the imports
    sys.setswitchinterval(0.001)
    if _importing is None:
        _importing = threading.Thread(target=_import, name="lengen-import", daemon=True)
        _importing.start()


def _import() -> None:
    try:
        import pandas  # noqa: F401 — plotly reads pandas when it is in sys.modules, even half imported
        import plotly.io  # what the early chart needs, before anything else

        plotly.io.to_json(_one_point())
    finally:
        _chart_ready.set()  # a module half imported by this thread breaks the chart's own (a race seen under load)
    for name in LAB_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 — the router imports it again and shows the error where it can be read
            return


def _one_point() -> go.Figure:
    return go.Figure(go.Scatter(x=[0], y=[0]), layout=dict(height=40, width=40, margin=dict(l=0, r=0, t=0, b=0)))


def wait_for_the_lab() -> None:
    """Until the thread of `import_the_lab`, if any, is done."""
    if _importing is not None:
        _importing.join()


EARLY_KEY = "early-plotly"  # the element's key; its container carries the class st-key-early-plotly
LOADED = "_plotly_loaded"  # session state: this browser tab has loaded plotly.js already
HIDDEN_CSS = f"""<style>
.st-key-{EARLY_KEY} {{ position: absolute !important; width: 40px; height: 1px !important; overflow: hidden;
    opacity: 0; pointer-events: none; }}
</style>"""


def load_plotly_early() -> DeltaGenerator:
    """A slot at the top of the page, to clear with `done`; on a session's first run it holds an invisible
    one-point chart. The slot is made on every run, so the page's elements keep their places from run to
    run and the browser redraws none of them (a preset click would otherwise redraw the Start picture)."""
    slot = st.empty()
    if not st.session_state.get(LOADED):
        st.session_state[LOADED] = True
        if _importing is not None:
            _chart_ready.wait()  # pandas is imported by one thread at a time, or plotly finds it half made
        with slot.container():
            st.html(HIDDEN_CSS)
            st.plotly_chart(_one_point(), key=EARLY_KEY, config={"staticPlot": True})
    return slot


def done(slot: DeltaGenerator) -> None:
    """Remove the early chart (a page's own charts are what a person sees)."""
    slot.empty()

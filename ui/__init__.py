"""The app's helpers between the pages and the core, in folders by idea: captions/ and charts/ (plain data in,
a sentence or a figure out; no Streamlit), rules/, lessons/, training/ and theory/; at the top, the run
picker and links (state), cached analyses (runs, analyses), presets, widgets, downloads and the glossary.

Importing this package also settles how the server routes. app.py is the router (`st.navigation`),
but a `pages/` folder beside it makes Streamlit start each server in its older multipage mode,
which lasts until the first run of app.py: a link straight to a page (`/dilution?...`) as a
server's first request ran that page file alone, without the router, the sidebar or the link
handling, for every visitor until someone opened `/`. Every page imports `ui`, so the first run
of any page turns that mode off here and reruns through app.py. Under `streamlit run serve.py` the
server imports `ui` (for its download route) before it decides the mode, so the mode is turned off
before it is ever on: otherwise a page file's later runs, which find `ui` imported already, would
never turn it off.
"""

from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

if PagesManager.uses_pages_directory is not False:  # None: not decided yet (serve.py imports ui before any run)
    was_on = PagesManager.uses_pages_directory
    PagesManager.uses_pages_directory = False
    if was_on and get_script_run_ctx(suppress_warning=True) is not None:
        import streamlit as st

        st.rerun()

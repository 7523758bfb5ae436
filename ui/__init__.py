"""The only Streamlit-aware helpers: state and links, cached wrappers, charts, the shared training pool, presets.

Importing this package also settles how the server routes. app.py is the router (`st.navigation`),
but a `pages/` folder beside it makes Streamlit start each server in its older multipage mode,
which lasts until the first run of app.py: a link straight to a page (`/dilution?...`) as a
server's first request ran that page file alone, without the router, the sidebar or the link
handling, for every visitor until someone opened `/`. Every page imports `ui`, so the first run
of any page turns that mode off here and reruns through app.py.
"""

from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

if PagesManager.uses_pages_directory:
    PagesManager.uses_pages_directory = False
    if get_script_run_ctx(suppress_warning=True) is not None:
        import streamlit as st

        st.rerun()

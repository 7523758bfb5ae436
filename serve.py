"""The server: Streamlit's app (`app.py`, the router) plus a route that streams a run's zip from
disk (`ui.downloads`). Serve it with `streamlit run serve.py`: Streamlit finds the `st.App` below and
serves it with its own options (`.streamlit/config.toml`, `--server.*` flags)."""

import streamlit as st
from streamlit import config

from ui import early
from ui.downloads import routes

early.import_the_lab()  # torch, pandas and the pages' modules, while the server starts (ui.early)
app = st.App("app.py", routes=routes(config.get_option("server.baseUrlPath")))

"""lengen: length generalisation in attention, live. Run with `streamlit run app.py`."""

import streamlit as st

from ui.state import run_sidebar

st.set_page_config(page_title="lengen", layout="wide")
page = st.navigation([
    st.Page("pages/start.py", title="Start", icon="🏠", default=True),
    st.Page("pages/train.py", title="Train", icon="🏋️"),
    st.Page("pages/attention.py", title="Attention", icon="🔍"),
    st.Page("pages/carrier.py", title="Carrier", icon="〰️"),
    st.Page("pages/dilution.py", title="Dilution", icon="📉"),
])
run_sidebar()  # the selected run, shown and switchable on every page
page.run()

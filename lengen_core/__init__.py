"""lengen_core: the pure science engine of lengen (no streamlit, no printing, no network)."""

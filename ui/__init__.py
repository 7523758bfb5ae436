"""The only Streamlit-aware helpers: state and links, cached wrappers, charts, the shared training pool, presets."""

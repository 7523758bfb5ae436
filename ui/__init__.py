"""The only Streamlit-aware helpers: state, cached wrappers, charts, the training worker, presets."""

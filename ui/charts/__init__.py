"""Plotly chart builders: plain data in, a figure out. No Streamlit, no tensors."""

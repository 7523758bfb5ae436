"""Captions computed from the run they describe: plain numbers in, a sentence out. No Streamlit."""

"""Lessons: the TOML files (files), the elements a step can show (elements) and the Lessons page (view)."""

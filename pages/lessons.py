"""Lessons: a teacher's guided walk through the lab, one step at a time (docs/lessons.md)."""

import streamlit as st

from ui.glossary import lead
from ui.lessons.view import LESSON, lessons_page

if LESSON not in st.query_params:  # the index; a lesson's step draws its own title
    st.title("Lessons")
    lead("lessons")
lessons_page()

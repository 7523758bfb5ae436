"""A newcomer's first step, on the Start page's first screen: the first lesson, one click away, and the list of all.

The lessons are the lab's way in for someone who knows none of its words (assets/lessons, docs/lessons.md): each
step is one chart and one question. The link opens the first lesson (in the lessons' own order) at its first step,
as the lesson's own link does (`?lesson=NAME&step=1`).
"""

from __future__ import annotations

import streamlit as st

from ui.lessons.files import load_lessons
from ui.lessons.view import LESSON, LESSON_PAGE, STEP

FIRST_STEP_KEY = "start-first-step"  # the box's key, so a browser test can find it on the first screen


def first_step() -> None:
    """A box with the first lesson's link (its title and number of steps) and a link to every lesson."""
    lessons, _ = load_lessons()  # (a file with a problem is said on the Lessons page, not here)
    with st.container(border=True, key=FIRST_STEP_KEY):
        st.markdown("**New here?** Start with a lesson: each step is one chart and one question, in plain words, "
                    "and some let you train a model yourself and watch it learn.")
        if lessons:
            name, lesson = next(iter(lessons.items()))
            st.page_link(LESSON_PAGE, label=f"**Start lesson 1: {lesson.title}** ({len(lesson.steps)} steps) →",
                         icon=":material/school:", query_params={LESSON: name, STEP: "1"},
                         help="Opens the first lesson at its first step; Next walks through it.")
        st.page_link(LESSON_PAGE, label=f"All {len(lessons)} lessons" if lessons else "The Lessons page",
                     icon=":material/list:", help="The lessons, each with what it shows and how many steps it has.")

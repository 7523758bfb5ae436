"""Lessons: a teacher's guided walk through the lab, one step at a time (docs/lessons.md)."""

from ui.lesson_view import lessons_page

lessons_page()

"""Lesson elements that train: the Train form holding the lesson's run with the live view of a training
started from it, and the chart of the runs this session trained on the lesson's Train steps beside the
step's presets (ui.lessons.class_runs) (ui.lessons.elements)."""

from __future__ import annotations

import streamlit as st

from lengen_core.config import SETTINGS
from ui.lessons import class_runs
from ui.lessons.files import Step
from ui.lessons.frame import Projector, draw
from ui.training.form import request, show_message, train_form
from ui.training.live import TICKET_KEY, live_training, open_trained_run
from ui.training.pool import usable_pool

PRESENT_LIVE_HEIGHT = 300  # each of a live training's four charts, two by two
LOCKED = tuple(SETTINGS)  # a students' link (lock=1) fixes every setting of the lesson's run, not only those it names
LIVE_CONFIG_KEY = "lesson_training_config"  # the config of the training this session asked for from a lesson


def train(step: Step, presenting: Projector | None, locked: bool = False) -> None:
    """The Train form holding the lesson's run (in presenter mode only the settings the lesson sets, beside the
    live view; on a students' link every setting fixed: the lesson's config is the whole run), the live view
    of a training started here, from the untrained model to the last frame, which stays with the run's verdict
    once it ends, and the message it leaves."""
    if (pool := usable_pool()) is None:  # its cluster is out of reach: said in its place
        return
    with presenting.notes if presenting else st.container():
        choice = train_form(step.config, shown=step.fixed if presenting else None,
                            locked=LOCKED if locked else (), pace=step.pace)
        if choice is not None and choice.submitted:
            st.session_state[LIVE_CONFIG_KEY] = choice.config  # what the live view draws until it ends
            request(pool, choice.config, choice.pace)
        show_message()
        held = step.config if choice is None else choice.config
    open_trained_run(held, present=presenting is not None)  # the form's run, once stored and not live: on top
    live = st.session_state.get(LIVE_CONFIG_KEY, held) if TICKET_KEY in st.session_state else held
    live_training(pool, PRESENT_LIVE_HEIGHT if presenting else None, live)


def class_runs_chart(step: Step, presenting: Projector | None) -> None:
    """The runs this session trained on the lesson's Train steps beside the step's presets (ui.lessons.class_runs)."""
    figure, look_for, table = class_runs.figure_and_caption(step)
    draw(figure, look_for, table, "class-runs", "lesson", presenting)


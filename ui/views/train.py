"""The Train page's words around its form and live view (ui.training): the device and the tasks, a continuation's
note, and the selected run's own training when nothing else is shown."""

from __future__ import annotations

import streamlit as st

from lengen_core.config import RunConfig
from ui.state import linked_config
from ui.training.live import TICKET_KEY, stored_training
from ui.training.pool import RayTrainingPool, TrainingPool, training_device_name
from ui.widgets import selected_run


def about(pool: TrainingPool | RayTrainingPool) -> None:
    """The device in use, the tasks, when training stops, and how many runs `pool` trains at once."""
    st.caption(f"Device in use: **{training_device_name()}**. The task: answer the token k places before the "
               "last one (C2), shift the whole sequence by k, or recall a token a delay back at a fixed length "
               "(delay-copy, selective-copy: the Delays page). Training stops early once the batch accuracy "
               f"holds at 100%. {'The training cluster' if getattr(pool, 'shared', False) else 'This server'} trains "
               f"at most {pool.max_concurrent} runs at once; the rest wait in line.")


def continuation_note(base: RunConfig) -> None:
    """For a link from Dilution's "Train longer": which run this continues, and how."""
    if base.train.continues:
        st.info(f"This run continues `{base.train.continues}`: it starts from that run's trained weights and trains "
                f"{base.train.steps:,} more steps, past 100% training accuracy. Keep its task and model as they are.",
                icon=":material/fitness_center:")


def selected_training() -> None:
    """The selected run's own training, when no training of this session and no linked config is shown."""
    if TICKET_KEY not in st.session_state and linked_config() is None and (run := selected_run()) is not None:
        stored_training(run)

"""Session state: the selected run id follows the person from page to page.

A first visit selects the RoPE preset. The sidebar shows the selected run and a selector of every
preset and stored run.
"""

from __future__ import annotations

import streamlit as st

from lengen_core.store import RunStore
from ui.presets import DEFAULT_PRESET, preset_ids
from ui.runs import run_label, stored_run_ids

RUN_KEY = "run_id"
PICKER_KEY = "_run_picker"


def selected_run_id() -> str | None:
    if RUN_KEY not in st.session_state:
        st.session_state[RUN_KEY] = preset_ids().get(DEFAULT_PRESET)
    return st.session_state[RUN_KEY]


def select_run(run_id: str | None) -> None:
    st.session_state[RUN_KEY] = run_id


def _picked() -> None:
    select_run(st.session_state[PICKER_KEY])


def run_sidebar() -> None:
    """The selected run and a selector of presets and stored runs, on every page."""
    options = list(dict.fromkeys([*preset_ids().values(), *stored_run_ids()]))
    current = selected_run_id()
    if current is not None and current not in options:
        options.insert(0, current)
    if not options:
        st.sidebar.info("No run yet: train one on the Train page.")
        return
    if st.session_state.get(PICKER_KEY) != current:
        st.session_state[PICKER_KEY] = current if current in options else options[0]
    st.sidebar.selectbox(
        "Selected run", options, key=PICKER_KEY, format_func=run_label, on_change=_picked,
        help="Every page shows this run. Presets ship with the app; runs you train are added here.",
    )
    st.sidebar.caption(f"Run id: `{current}`")
    st.sidebar.caption(f"Your runs are stored in `{RunStore().root}`")

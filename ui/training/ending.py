"""What a lesson's training leaves when it ends: its last frame stays where the live view was, with the
run's verdict in a line a projector holds and one click that opens the run on its page (in presenter mode
from presenter mode).
"""

from __future__ import annotations

import streamlit as st

from lengen_core.config import DELAY_TASKS, RunConfig
from lengen_core.training import Run
from ui.runs import load_run, stores
from ui.state import select_run
from ui.training.frames import frame

FINAL_KEY = "training_final"  # (config, JobStatus) of a lesson's training that ended: its frame stays
OPEN_KEY, PRESENT_PARAM = "training_open", "present"
CAPTIONS = "Captions"  # on a projector, the live charts' captions fold into a popover of this name


def final_frame(config: RunConfig, height: int | None) -> bool:
    """The last frame of the lesson's training that ended here, if `config` is its run: the run's verdict and
    a button that opens it beside, and the charts as they were at its last step, in the live view's slots.
    Returns whether it was drawn."""
    kept = st.session_state.get(FINAL_KEY)
    if kept is None or kept[0] != config:
        return False
    status = kept[1]
    run_id = status.stored_run_id
    run = next((load_run(run_id) for store in stores() if store.exists(run_id)), None)
    done = ("Already trained" if status.from_store else "Stopped" if status.stopped else "Finished") + (
        f" at step {status.progress.step:,}" if status.progress and not status.from_store else "")
    if run is None:  # removed since: nothing to open
        st.info(f"{done}: run `{run_id}` is no longer stored here.")
    else:
        learned = run.verdict is None or run.verdict.learned
        (st.success if learned else st.warning)(f"**{done}** · {short_verdict(run)}")
    button, *more = st.columns([1, 1] if height else [1])  # where the progress and the controls were
    if run is not None:
        open_button(run, button, present=height is not None)
    frame(status, height, config, more[0].popover(CAPTIONS, icon=":material/info:", width="stretch")
          if more else None)
    return True


def short_verdict(run: Run) -> str:
    """'learned: accuracy 1.00 at L = 16, 1.00 at 64': the verdict in a line a projector holds (the pages give it
    whole, with its intervals)."""
    verdict, L = run.verdict, run.config.task.train_length
    if verdict is None:
        return f"run `{run.run_id}`"
    text = f"{'learned' if verdict.learned else 'did not learn'}: accuracy {verdict.in_range_accuracy:.2f} at L = {L}"
    if verdict.beyond_length is not None:
        text += f", {verdict.beyond_accuracy:.2f} at {verdict.beyond_length:,}"
    return text


def run_page(config: RunConfig) -> tuple[str, str]:
    """The page that reads `config`'s run, and its title: Delays for a delay task, Dilution for a single head,
    else Transformer."""
    return (("pages/delays.py", "Delays") if config.task.task in DELAY_TASKS else
            ("pages/dilution.py", "Dilution") if config.single_head else ("pages/transformer.py", "Transformer"))


def open_button(run: Run, where, present: bool) -> None:
    """One click: select `run` and open its page; from presenter mode, in presenter mode (`present=1`)."""
    page, title = run_page(run.config)
    label = f"Open on {title}" if present else f"Open the trained run on the {title} page"  # a projector's row is short
    where.button(label, icon=":material/open_in_new:", key="lesson-open-run", width="stretch",
                 on_click=_open, args=(run.run_id, page, present),
                 help=None if present else f"Select run {run.run_id} and open the {title} page.")
    if (target := st.session_state.pop(OPEN_KEY, None)) is not None:
        st.switch_page(target[0], query_params={PRESENT_PARAM: "1"} if target[1] else None)


def _open(run_id: str, page: str, present: bool) -> None:
    select_run(run_id)
    st.session_state[OPEN_KEY] = (page, present)  # switch_page cannot run in a callback: the next run does it

"""The Delays page: a delay-task run's accuracy against the delay at a fixed length (C10), the shipped diversity
sweep, and transfer to unseen delays; the pieces are ui.delays'."""

from __future__ import annotations

import streamlit as st

from lengen.presets import delay_presets
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui import widgets
from ui.address import stop
from ui.delays import (
    SAMPLE_CHOICES,
    curve,
    curve_table,
    delay_caption,
    delay_figure,
    delay_run_ids,
    diversity_caption,
    diversity_figure,
    diversity_table,
    preset_diversity,
    transfer_section,
)
from ui.runs import load_run, run_labels
from ui.state import select_run, selected_run_id


def introduction() -> None:
    """What changes on this page: the delay, not the length."""
    st.markdown("The context length stays the one the run trained at; what changes is the **delay** between the "
                "source token and the query that recalls it. **Delay-copy**: the source is the last content token, "
                "followed by d fillers. **Selective-copy**: the source carries a marker (its marked copy), anywhere "
                "among ordinary tokens. A run trains on a set of delays (e.g. 2–8); this page reads it at every delay "
                "the context holds, seen and unseen.")


def preset_buttons() -> None:
    """A button per shipped delay run, selecting it."""
    presets = list(delay_presets().items())
    columns = [column for _ in range(0, len(presets), 3) for column in st.columns(3)]  # rows of three, unclipped
    for column, (label, run_id) in zip(columns, presets, strict=False):
        if column.button(f"Open {label}", key=f"open-delay-{label}", width="stretch",
                         help="Select this shipped minimal head (length 32, V 16, delays 2–8, seed 0)."):
            select_run(run_id)
            st.rerun()


def delay_run() -> Run:
    """The selected run, summarised, if it is on a delay task; else the page offers the delay runs and stops."""
    run_id = selected_run_id()
    candidates = delay_run_ids()
    if run_id not in candidates:
        st.info("The selected run is not on a delay task. Open a shipped delay run, pick one of your own below, or "
                "train one on the Train page with the task delay-copy or selective-copy and its delays (e.g. 2-8).")
        preset_buttons()
        if candidates:
            labels = run_labels(candidates)
            chosen = st.selectbox("Delay runs stored here", candidates, index=None, format_func=labels.get,
                                  placeholder="Choose a delay run")
            if chosen is not None:
                select_run(chosen)
                st.rerun()
        stop()
    run = load_run(run_id)
    widgets.run_summary(run)
    return run


def delay_curve(run: Run) -> None:
    """Accuracy against the delay, the trained delays shaded apart from the unseen ones; then the other runs."""
    samples = st.select_slider("Sequences per delay", SAMPLE_CHOICES, value=256,
                               help="Fresh sequences at each delay (their own seed); more narrows each interval.")
    try:
        result = curve(run.run_id, samples)
    except ConfigError as error:
        widgets.refusal("Not computed for this run", error)
        stop()
    widgets.chart(delay_figure(result), delay_caption(run, result), curve_table(result), "delays", stem=run.run_id)
    with st.expander("Other delay runs"):
        preset_buttons()


def diversity() -> None:
    """The shipped sweep over the training delays: does a head that saw more delays carry to the unseen ones?"""
    st.subheader("Data diversity: how many delays training saw")
    st.markdown("A sweep over the training delays (the sweep machinery's delay-set axis: `python -m lengen sweep "
                "--delay-sets '2;2-4;2-8;2-16' --set task=delay-copy …`), shipped with the lab: does a head that saw "
                "more delays carry to the ones it did not?")
    shipped = preset_diversity()
    if shipped is None:
        st.info("The shipped diversity sweep is missing from this installation (scripts/build_presets.py --delays "
                "makes it).")
    else:
        table = diversity_table(shipped.cells)
        widgets.chart(diversity_figure(table), diversity_caption(table), table, "delay-diversity", stem=shipped.sweep_id,
                      key="sweep_id")
        st.caption("Run a diversity sweep of your own (other encodings, delay sets, seeds or the selective-copy task) "
                   "on the Sweeps page: choose the task delay-copy or selective-copy there.")


def transfer(run: Run) -> None:
    """Training on unseen delays after the trained ones (ui.delays.transfer_section), and its command line."""
    transfer_section(run)
    st.caption("The same measurement from the command line, with A trained first: `python -m lengen transfer --task "
               "delay-copy --delays 9-16 --before 2-8 --train-length 32 --d-model 64` (docs/cli.md).")

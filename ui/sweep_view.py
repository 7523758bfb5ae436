"""The Sweeps page drawn: the grid's form with its estimate, the running sweep's progress, the choice of
sweep shown, and a length sweep's charts (accuracy, the data collapse, the carrier's argmax, margins and
horizons) with their downloads; a delay sweep is drawn by `ui.delays.diversity_view`. The parts each
reads (charts, captions, the runner) are `ui.sweep_panels`'."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lengen.budget import duration
from lengen.presets import SWEEP_LONGEST_CHOICES
from lengen.sweep import SweepError, SweepResult, check_sweep
from lengen_core.config import DELAY_TASKS, SETTINGS, ConfigError
from ui import sweep_panels as sweeps
from ui import sweep_runs
from ui.charts.readable import readable_altair
from ui.delays import diversity_view, preset_diversity
from ui.training.pool import browser_id
from ui.widgets import refusal


def task_choice() -> str:
    """The task the grid is over: retrieval (accuracy against length) or a delay task (against the delay)."""
    return st.segmented_control("Task", sweeps.SWEEP_TASKS, default="retrieval", key="sweep-task",
                                help="retrieval: accuracy against length (the preset sweep). delay-copy and "
                                     "selective-copy: accuracy against the delay at the training length, over the "
                                     "delay sets training saw (data diversity).") or "retrieval"


def grid_form(runner: sweeps.SweepRunner, task: str) -> None:
    """The grid's form, its estimate (or why it cannot run here), and its start on this server."""
    delay_task = task in DELAY_TASKS
    with st.form("sweep-grid-delays" if delay_task else "sweep-grid"):
        st.markdown("**A grid**: every combination below is one run (trained, or taken from the store if it exists), "
                    + ("read at every delay its context holds." if delay_task else "measured at each length."))
        left, middle, right = st.columns(3)
        chosen = {}  # each axis of the grid the task has (ui.sweep_panels.form_axes), first showing a shipped sweep's values
        for axis in sweeps.form_axes(task):
            shown, key = sweeps.shown_values(axis, task), sweeps.axis_key(axis, task)
            if axis.kind is str and axis.setting != "delays":  # a setting with named choices
                chosen[axis] = left.multiselect(axis.label, SETTINGS[axis.setting].choices, default=list(shown), key=key)
            else:
                column = right if axis.setting == "delays" else middle
                chosen[axis] = column.text_input(axis.label, sweeps.axis_text(axis, shown), key=key,
                                                 help=f"separated by '{axis.separator}'{axis.note and ': ' + axis.note}")
        longest = 0 if delay_task else right.select_slider("Longest test length", SWEEP_LONGEST_CHOICES, value=1 << 12,
                                                           format_func=lambda n: f"{n:,}")
        samples = right.select_slider("Sequences per delay" if delay_task else "Sequences per length",
                                      [64, 128, 256, 512], value=128)
        start = st.form_submit_button("Run the sweep", type="primary")
    try:
        grid = sweeps.form_grid(task, chosen, samples, longest)
        estimate = check_sweep(grid)
        each = ("each read at every delay of its training length" if delay_task else
                f"each at {len(grid.lengths)} lengths up to {longest:,}")
        st.caption(f"{grid.size} runs, {each}: about {duration(estimate)} of work estimated on this server (runs "
                   "already stored take less).")
    except (SweepError, ConfigError) as error:  # ConfigError covers the budgets' BudgetError
        refusal("This sweep cannot run here", error)
        return
    if start:
        try:
            runner.start(grid, browser_id() or "anyone")
        except (RuntimeError, ConfigError) as error:
            refusal("The sweep did not start", error)


@st.fragment(run_every=1.0)
def live(runner: sweeps.SweepRunner) -> None:
    """The running sweep's progress (and its Cancel, for the session that started it), redrawn every second;
    once it ends, the page reruns to draw its results."""
    current = runner.current
    if current is None or not (current.running or current.result or current.error):
        return
    if current.running:
        done = current.progress.done / current.progress.total if current.progress else 0.0
        st.progress(done, text=f"Sweep `{current.grid.sweep_id()}`: "
                               f"{sweeps.progress_text(current.progress, current.grid.size)}")
        if current.owner == (browser_id() or "anyone") and st.button("Cancel the sweep", key="sweep-cancel"):
            current.cancel.set()
    elif current.error:
        st.error(f"The sweep stopped: {current.error}")
    elif st.session_state.get("sweep-shown") != current.grid.sweep_id():
        st.session_state["sweep-shown"] = current.grid.sweep_id()
        st.rerun()  # draw its results below


def shown_sweep(runner: sweeps.SweepRunner, task: str) -> SweepResult | None:
    """The sweep the person picks to see: a shipped one or this server's last (first the one of the task's kind)."""
    current = runner.current
    choices = {"The preset sweep (3 seeds × 4 offsets × RoPE and learned, shipped)": sweeps.preset_result(),
               "The diversity sweep (delay-copy: 4 delay sets × 3 encodings × 2 seeds, shipped)": preset_diversity()}
    if current is not None and current.result is not None:
        choices[f"This server's last sweep ({current.grid.size} runs"
                f"{', cancelled' if current.result.cancelled else ''})"] = current.result
    label = st.radio("Show", list(choices), index=sweeps.shown_first(list(choices.values()), task in DELAY_TASKS),
                     horizontal=True)
    return choices[label]


def sweep_view(result: SweepResult | None) -> None:
    """A sweep's results: a delay sweep against how many delays training saw, a length sweep's charts."""
    if result is None:
        st.info("No sweep to show yet: this shipped sweep is missing from this installation; run one above.")
    elif sweeps.is_delay_sweep(result):
        diversity_view(result)
    else:
        length_sweep_view(result)


def length_sweep_view(result: SweepResult) -> None:
    """Accuracy against length per encoding, the data collapse (points pick runs), where the carrier points,
    far margins and horizons, and the table's downloads."""
    table = result.table()
    cells = pd.DataFrame([{k: v for k, v in c.items() if k != "lengths"} for c in result.cells])
    failed = cells[cells["error"].notna()] if "error" in cells else cells.iloc[0:0]
    if len(failed):
        st.warning(f"{len(failed)} of {len(cells)} cells failed; the rest are shown. " +
                   "; ".join(f"{r.encoding} k {r.offset} seed {r.seed}: {r.error}" for r in failed.head(5).itertuples()))

    st.subheader("Accuracy against length, per encoding")
    st.altair_chart(readable_altair(sweeps.accuracy_chart(table)), width="content")
    st.caption(f"**What to look for:** the band runs from the lowest to the highest run of each encoding (seeds and "
               f"offsets pooled); the dashed line is chance, 1/V. {sweeps.accuracy_caption(table)}")

    st.subheader("The data collapse: every learned RoPE run on one curve")
    points, curves, summary = sweeps.collapse_frame(result.cells)
    picked = set()
    if points.empty:
        st.info(sweeps.collapse_caption(summary))
    else:
        event = st.altair_chart(readable_altair(sweeps.collapse_chart(points, curves)), width="stretch",
                                on_select="rerun",
                                key="collapse")
        picked = sweeps.picked_runs(event)
        st.caption(f"**What to look for:** {sweeps.collapse_caption(summary)}")
        st.caption(sweeps.picked_caption(cells, picked))
        st.dataframe(sweeps.per_run_rows(cells, picked), hide_index=True)
    sweep_runs.open_run_panel(result, picked)

    left, right = st.columns(2)
    with left:
        st.subheader("Where the carrier points")
        st.altair_chart(readable_altair(sweeps.argmax_chart(cells, picked)), width="stretch")
        st.caption(f"**What to look for:** {sweeps.argmax_caption(cells)}")
    with right:
        st.subheader("Far margin and horizon, per run")
        st.altair_chart(readable_altair(sweeps.margin_chart(cells, picked)), width="stretch")
        st.caption(f"**What to look for:** {sweeps.margin_caption(cells)} A learned-position run has no m_out.")
    with st.container(horizontal=True):  # side by side, each as wide as its label
        st.download_button("Download the table (CSV)", table.to_csv(index=False).encode(),
                           file_name=f"{result.sweep_id}.csv", mime="text/csv",
                           help="One row per run and length, with the run's figures.")
        st.download_button("Download the table (Parquet)", sweeps.parquet_bytes(table),
                           file_name=f"{result.sweep_id}.parquet", mime="application/vnd.apache.parquet",
                           help="The same table with its column types kept (pandas.read_parquet).")

"""Sweeps: a grid of runs over encodings, offsets and seeds, one table, and the data collapse (C6)."""

import pandas as pd
import streamlit as st

from lengen_core.config import SETTINGS, ConfigError
from lengen_core.serving.budget import duration
from lengen_core.serving.sweep import AXES, SweepError, SweepGrid, check_sweep
from ui import sweep_panels as sweeps
from ui import sweep_runs
from ui.glossary import lead
from ui.presets import SWEEP_LENGTHS, SWEEP_LONGEST_CHOICES
from ui.training.pool import browser_id
from ui.widgets import refusal

st.title("Sweeps: many runs, one law")
lead("sweeps")

runner = sweeps.sweep_runner()
with st.form("sweep-grid"):
    st.markdown("**A grid**: every combination below is one run (trained, or taken from the store if it exists), "
                "measured at each length.")
    left, middle, right = st.columns(3)
    chosen = {}  # each axis of the grid (lengen_core.serving.sweep.AXES), first showing the preset sweep's values
    for axis in (axis for axis in AXES if axis.setting != "delays"):  # delay sets: the command line's (docs/sweeps.md)
        shown, key = getattr(sweeps.PRESET_GRID, axis.field), f"sweep-{axis.field}"
        if axis.kind is str:  # a setting with named choices
            chosen[axis] = left.multiselect(axis.label, SETTINGS[axis.setting].choices, default=list(shown), key=key)
        else:
            chosen[axis] = middle.text_input(axis.label, ",".join(map(str, shown)), key=key,
                                             help=f"comma separated{axis.note and ', ' + axis.note}")
    longest = right.select_slider("Longest test length", SWEEP_LONGEST_CHOICES, value=1 << 12,
                                  format_func=lambda n: f"{n:,}")
    samples = right.select_slider("Sequences per length", [64, 128, 256, 512], value=128)
    start = st.form_submit_button("Run the sweep", type="primary")


def numbers(text: str, label: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise SweepError(f"{label}: give whole numbers separated by commas, got {text!r}") from None
    return values


try:
    grid = SweepGrid(**{axis.field: tuple(value) if axis.kind is str else numbers(value, axis.label)
                        for axis, value in chosen.items()},
                     samples=samples, lengths=tuple(n for n in SWEEP_LENGTHS if n <= longest))
    estimate = check_sweep(grid)
    st.caption(f"{grid.size} runs, each at {len(grid.lengths)} lengths up to {longest:,}: about "
               f"{duration(estimate)} of work estimated on this server (runs already stored take less).")
except (SweepError, ConfigError) as error:  # ConfigError covers the budgets' BudgetError
    refusal("This sweep cannot run here", error)
    grid = None
if start and grid is not None:
    try:
        runner.start(grid, browser_id() or "anyone")
    except (RuntimeError, ConfigError) as error:
        refusal("The sweep did not start", error)


@st.fragment(run_every=1.0)
def live() -> None:
    current = runner.current
    if current is None or not (current.running or current.result or current.error):
        return
    if current.running:
        done = current.progress.done / current.progress.total if current.progress else 0.0
        st.progress(done, text=f"Sweep `{current.grid.sweep_id()}`: {sweeps.progress_text(current.progress, current.grid.size)}")
        if current.owner == (browser_id() or "anyone") and st.button("Cancel the sweep", key="sweep-cancel"):
            current.cancel.set()
    elif current.error:
        st.error(f"The sweep stopped: {current.error}")
    elif st.session_state.get("sweep-shown") != current.grid.sweep_id():
        st.session_state["sweep-shown"] = current.grid.sweep_id()
        st.rerun()  # draw its results below


live()
current = runner.current
choices = {"The preset sweep (3 seeds × 4 offsets × RoPE and learned, shipped)": sweeps.preset_result()}
if current is not None and current.result is not None:
    choices[f"This server's last sweep ({current.grid.size} runs{', cancelled' if current.result.cancelled else ''})"] = current.result
label = st.radio("Show", list(choices), index=len(choices) - 1, horizontal=True)
result = choices[label]
if result is None:
    st.info("No sweep to show yet: the preset sweep is missing from this installation; run one above.")
    st.stop()

table = result.table()
cells = pd.DataFrame([{k: v for k, v in c.items() if k != "lengths"} for c in result.cells])
failed = cells[cells["error"].notna()] if "error" in cells else cells.iloc[0:0]
if len(failed):
    st.warning(f"{len(failed)} of {len(cells)} cells failed; the rest are shown. " +
               "; ".join(f"{r.encoding} k {r.offset} seed {r.seed}: {r.error}" for r in failed.head(5).itertuples()))

st.subheader("Accuracy against length, per encoding")
st.altair_chart(sweeps.accuracy_chart(table), width="content")
st.caption(f"**What to look for:** the band runs from the lowest to the highest run of each encoding (seeds and "
           f"offsets pooled); the dashed line is chance, 1/V. {sweeps.accuracy_caption(table)}")

st.subheader("The data collapse: every learned RoPE run on one curve")
points, curves, summary = sweeps.collapse_frame(result.cells)
picked = set()
if points.empty:
    st.info(sweeps.collapse_caption(summary))
else:
    event = st.altair_chart(sweeps.collapse_chart(points, curves), width="stretch", on_select="rerun", key="collapse")
    picked = sweeps.picked_runs(event)
    st.caption(f"**What to look for:** {sweeps.collapse_caption(summary)}")
    st.caption(sweeps.picked_caption(cells, picked))
    st.dataframe(sweeps.per_run_rows(cells, picked), hide_index=True)
sweep_runs.open_run_panel(result, picked)

left, right = st.columns(2)
with left:
    st.subheader("Where the carrier points")
    st.altair_chart(sweeps.argmax_chart(cells, picked), width="stretch")
    st.caption(f"**What to look for:** {sweeps.argmax_caption(cells)}")
with right:
    st.subheader("Far margin and horizon, per run")
    st.altair_chart(sweeps.margin_chart(cells, picked), width="stretch")
    st.caption(f"**What to look for:** {sweeps.margin_caption(cells)} A learned-position run has no m_out.")
with st.container(horizontal=True):  # side by side, each as wide as its label
    st.download_button("Download the table (CSV)", table.to_csv(index=False).encode(),
                       file_name=f"{result.sweep_id}.csv", mime="text/csv",
                       help="One row per run and length, with the run's figures.")
    st.download_button("Download the table (Parquet)", sweeps.parquet_bytes(table),
                       file_name=f"{result.sweep_id}.parquet", mime="application/vnd.apache.parquet",
                       help="The same table with its column types kept (pandas.read_parquet).")

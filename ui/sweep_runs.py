"""Opening a sweep's run: the Sweeps page lists the runs picked in its collapse plot (or all), and the one
chosen opens on the Dilution, Carrier or Compare page when it is stored here. A sweep keeps its cells'
numbers; the preset sweep ships no weights (scripts.build_presets), so a run that is not stored says so
and offers to put its config in the Train form instead of a link that would open nothing."""

from __future__ import annotations

import streamlit as st

from lengen.sweep import SweepResult
from lengen_core.claims import encoding_record
from lengen_core.config import RunConfig
from ui.runs import is_stored
from ui.state import LINK_CONFIG_KEY, TRAIN_PAGE, select_run

MAX_COMPARED = 6  # runs a sweep sends to the Compare page at once
OPEN_PAGES = {"Dilution": "pages/dilution.py", "Carrier": "pages/carrier.py"}  # where a sweep's run opens
COMPARE_PAGE, COMPARE_KEY = "pages/compare.py", "compare-runs"  # the Compare page and its runs box


def cell_configs(result: SweepResult) -> dict[str, RunConfig]:
    """run id -> config of every cell of the sweep that ran (lengen.sweep.SweepResult.configs: by each cell's own
    settings, not its place in the grid)."""
    return result.configs()


def cell_label(cell: dict) -> str:
    """'RoPE k=3 seed 1 · learned, m_out 5.21' for the run picker."""
    encoding = encoding_record(cell["encoding"]).display
    about = "learned" if cell.get("learned") else "not learned"
    if cell.get("m_out") is not None:
        about += f", m_out {cell['m_out']:.2f}"
    return f"{encoding} k={cell['offset']} seed {cell['seed']} · {about}"


def open_run_panel(result: SweepResult, picked: set[str]) -> None:
    """A picker of the sweep's runs (the ones picked in the collapse plot, else all), and for the run chosen:
    buttons that select it and open it on the Dilution, Carrier or Compare page when it is stored here, or,
    when it is not (the preset sweep ships its cells' numbers, not their weights), a button that puts its
    config in the Train form."""
    cells = {c["run_id"]: c for c in result.cells if c.get("run_id") and not c.get("error")}
    shown = sorted((r for r in cells if not picked or r in picked),
                   key=lambda r: (cells[r]["encoding"] != "rope", cells[r]["encoding"], cells[r]["offset"], cells[r]["seed"]))
    if not shown:
        return
    run_id = st.selectbox("Open a run of this sweep" + (" (the runs picked above)" if picked else ""), shown,
                          format_func=lambda r: cell_label(cells[r]), key="sweep-open-run",
                          help="Click a point of the collapse to list only its run here.")
    if is_stored(run_id):
        with st.container(horizontal=True):
            for title, page in OPEN_PAGES.items():
                if st.button(f"Open on the {title} page", key=f"sweep-open-{title}", icon=":material/open_in_new:",
                             help=f"Select run {run_id} and open the {title} page."):
                    select_run(run_id)
                    st.switch_page(page)
            together = [r for r in shown if is_stored(r)][:MAX_COMPARED]
            if st.button(f"Compare {'the ' + str(len(together)) + ' listed runs' if len(together) > 1 else 'it'}",
                         key="sweep-open-Compare", icon=":material/stacked_line_chart:",
                         help="Open the Compare page with " + ("these stored runs" if len(together) > 1 else "this run")
                              + f" (at most {MAX_COMPARED})."):
                st.session_state[COMPARE_KEY] = together
                select_run(run_id)
                st.switch_page(COMPARE_PAGE)
        st.caption(f"Run `{run_id}` is stored here: the buttons select it and open the page.")
        return
    config = cell_configs(result).get(run_id)
    st.info(f"Run `{run_id}` is not stored here: this sweep keeps each run's measured numbers (the charts above), "
            "not its trained weights, so no page can open it yet. Train it (same config and seed, so the same run "
            "id) and it opens like any other run.", icon=":material/info:")
    if config is not None and st.button("Put this run in the Train form", key="sweep-train", icon=":material/model_training:",
                                        help="Open the Train page with this run's config and seed; press Train there."):
        st.session_state[LINK_CONFIG_KEY] = config
        st.switch_page(TRAIN_PAGE)

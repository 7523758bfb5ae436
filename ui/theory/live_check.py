"""Section 4 of the Theory page, the live equivariance check (C3) on the selected run, at positions t and u
the reader picks (in the link as `t` and `u`); the check itself is ui.analyses.equivariance's (cached per run and positions)."""

import pandas as pd
import streamlit as st

from ui.analyses import equivariance
from ui.captions import mechanism as mechanism_captions
from ui.state import show_view, view_number
from ui.theory import charts as theory_charts
from ui.widgets import chart, run_summary, selected_run

TOLERANCE = 1e-3
LAST_POSITION = 1_000  # the live check's positions t, u: 0 … LAST_POSITION


def live_check() -> None:
    """Section 4: the equivariance check (C3) on the selected run, at positions t and u the reader picks."""
    st.header("4. Live check on the selected run")
    run = selected_run()
    if run is not None:
        run_summary(run)
        L_train, k = run.config.task.train_length, run.config.task.offset
        left, right = st.columns(2)
        with left:
            view_number("theory-t", "t", 0, LAST_POSITION, min(L_train - 1, LAST_POSITION))
        with right:
            view_number("theory-u", "u", 0, LAST_POSITION, min(max(0, L_train - 1 - k), LAST_POSITION))
        t = left.number_input("Query position t", 0, LAST_POSITION, key="theory-t",
                              help="The query's position before shifting; the last training position by default.")
        u = right.number_input("Key position u", 0, LAST_POSITION, key="theory-u",
                               help="The key's position before shifting; the target key t − k by default.")
        show_view("t", str(t))
        show_view("u", str(u))
        checks = equivariance(run.run_id, int(t), int(u))
        table = pd.DataFrame([vars(c) for c in checks])
        measured = table["max_abs_difference"].dropna()
        worst = float(measured[table["shift"] > 0].max()) if (table["shift"] > 0).any() else 0.0
        holds = worst < TOLERANCE
        a, b = st.columns(2)
        a.metric("Largest difference over the shifts", f"{worst:.2e}",
                 help="Max over every query token, key token (and head) and every shift s > 0 that the encoding allows.")
        b.metric("Logit depends on t − u alone", "yes" if holds else "no",
                 help=f"Yes when every difference is below {TOLERANCE:g}.")
        if not run.config.model.minimal:
            st.caption("Transformer: the check uses the first layer, the only one whose queries and keys are per token.")
        chart(theory_charts.equivariance(table, TOLERANCE),
              mechanism_captions.equivariance_caption([c.shift for c in checks], [c.max_abs_difference for c in checks],
                                                      checks[0].logit_scale, TOLERANCE, run.config.model.encoding,
                                                      None if run.verdict is None else run.verdict.learned),
              table, "equivariance")
        st.dataframe(table.assign(max_abs_difference=table["max_abs_difference"].map(
            lambda x: "beyond the position table" if pd.isna(x) else f"{x:.2e}")), hide_index=True)

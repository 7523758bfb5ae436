"""The Transformer page's section on where absolute position comes from (issue 30 §2): cached analyses,
priced first (lengen.budget), drawn with their captions. Logic lives here; the page calls
`section(run)`."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lengen.budget import check_absolute_position, check_mask_share
from lengen.shipped_absolute import shipped_absolute
from lengen_core.analysis.absolute import (
    PROBE_BASELINE_SEEDS,
    PROBE_SAMPLES,
    AbsolutePosition,
    analyse_absolute_position,
    sink_length_of,
)
from lengen_core.analysis.mask import MaskShare, has_denominator, mask_share
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui.analyses import length_multiples
from ui.captions import absolute as captions
from ui.captions import show
from ui.captions.common import Caption
from ui.charts import absolute as charts
from ui.runs import load_run
from ui.widgets import refusal

PROBE_MULTIPLES = (1, 4)  # the probe's lengths, × the training length


@st.cache_data(show_spinner="Probing absolute position…", max_entries=32)
def absolute_position(run_id: str, length: int, samples: int = PROBE_SAMPLES) -> AbsolutePosition:
    """Shipped with a preset (lengen.shipped_absolute), or priced and computed."""
    if (shipped := shipped_absolute(run_id, length, samples)) is not None:
        return shipped
    run = load_run(run_id)
    check_absolute_position(run.config, length, samples)
    return analyse_absolute_position(run.model, run.config, samples, length)


def probes(run: Run) -> tuple[dict[int, AbsolutePosition], list[ConfigError]]:
    """The analysis at each probe length (`PROBE_MULTIPLES` × L_train, those the run's encoding allows), and what
    this server refused."""
    found, refused = {}, []
    for length in length_multiples(run.run_id, PROBE_MULTIPLES):
        try:
            found[length] = absolute_position(run.run_id, length)
        except ConfigError as error:
            refused.append(error)
    return found, refused


def probe_chart(found: dict[int, AbsolutePosition]) -> tuple:
    """(figure, caption, data) of the probe against its untrained seeds at each length."""
    table = charts.probe_table({length: result.probe for length, result in found.items()})
    return charts.probe_chart(table, PROBE_BASELINE_SEEDS), captions.probe_caption(found), table


def _interventions(found: AbsolutePosition) -> pd.DataFrame:
    return pd.DataFrame([{"intervention": v.name, "length": found.length,
                          "accuracy": v.accuracy, **{f"R² layer {i}": r for i, r in enumerate(v.r2)},
                          "note": v.reason} for v in found.variants])


def section(run: Run) -> None:
    """The sink, the probe against untrained seeds, the interventions and the mask's share."""
    st.subheader("Where absolute position comes from")
    st.markdown("RoPE makes every logit depend on t − u alone, yet a transformer can still tell positions apart: "
                "through **position 0** (no keys before it, so a head can use it as an anchor) and through the "
                "**causal mask** (a later query normalises over more keys). A linear **probe** asks how much "
                f"position each layer's residual stream holds, against {PROBE_BASELINE_SEEDS} untrained "
                "initialisations of the same config.")
    L = run.config.task.train_length
    found, refused = probes(run)
    for error in refused:
        refusal("Not computed", error)
    if not found:
        return
    first = found[min(found)]
    sink = charts.sink_table(first.sink, first.uniform_sink)
    show.chart_captioned(charts.sink_grid(sink, L), captions.sink_caption(first, L), sink, "absolute-sink", run.run_id)
    show.chart_captioned(*probe_chart(found), "absolute-probe", run.run_id)
    st.markdown("**The interventions**: the same sequences with the first token's embedding replaced by the mean "
                "embedding, and with every position shifted by a constant.")
    table = pd.concat([_interventions(result) for result in found.values()], ignore_index=True)
    if not table["note"].any():
        table = table.drop(columns="note")
    st.dataframe(table, hide_index=True, column_config={
        column: st.column_config.NumberColumn(format="%.3f") for column in table.columns if column.startswith(("R²", "acc"))})
    for result in found.values():
        changed = captions.intervention_caption(result)
        show.caption(Caption(f"**What changed:** {changed.lead}", changed.more), "More on this intervention")
    _denominators(first.log_denominator, first.exact_log_denominator, L, max(4, first.samples // 4), run.run_id)


def _denominators(measured, exact, train_length: int, samples: int, run_id: str) -> None:
    look_for = captions.denominator_caption(measured, exact, train_length, samples)
    if measured is None:
        show.caption(look_for)
        return
    table = charts.denominator_table(measured, exact)
    show.chart_captioned(charts.denominator_chart(table, train_length), look_for, table, "absolute-denominator", run_id)


@st.cache_data(show_spinner="Reading the denominators…", max_entries=32)
def _mask_share(run_id: str, length: int) -> MaskShare:
    run = load_run(run_id)
    check_mask_share(run.config, length)
    return mask_share(run.model, run.config, length)


def minimal_section(run: Run) -> None:
    """For the minimal head: the mask's share alone (no residual stream to probe), exact under RoPE."""
    if not has_denominator(run.config):
        return
    st.subheader("The mask's share in this single head")
    st.markdown("RoPE's logits see only t − u, but a query at t normalises over the t + 1 keys the causal mask "
                "shows it. For the minimal RoPE head the expected denominator is an exact sum from the weights.")
    try:
        share = _mask_share(run.run_id, sink_length_of(run.config))
    except ConfigError as error:
        refusal("Not computed for this run", error)
        return
    _denominators(share.measured, share.exact, run.config.task.train_length, share.samples, run.run_id)

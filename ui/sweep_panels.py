"""The Sweeps page's parts: the server's one running sweep, the preset sweep, the altair charts and
captions read from the sweep's own numbers.

One sweep runs at a time on a server (`SweepRunner`, shared by every session): it runs in a thread
of the server with the local backend and LENGEN_SWEEP_WORKERS worker processes (default 1, beside
the training pool), after `check_sweep` priced it. Any session can watch it; the one that started it
can cancel it. Finished cells stay in the store, so a cancelled sweep started again resumes.
"""

from __future__ import annotations

import io
import math
import threading
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from lengen.presets import DIVERSITY_GRID, SWEEP_LENGTHS
from lengen.runtime import env_whole_number
from lengen.store import PRESET_ROOT, default_root
from lengen.sweep import (
    AXES,
    NO_DELAYS,
    Axis,
    SweepError,
    SweepGrid,
    SweepProgress,
    SweepResult,
    cell_config,
    check_sweep,
    collapse_summary,
    run_sweep,
    stored_sweep,
    sweep_collapse,
)
from lengen_core.analysis.collapse import vote_accuracy
from lengen_core.claims import ENCODING_RECORDS, encoding_record
from lengen_core.config import DELAY_TASKS, ConfigError
from lengen_core.thresholds import ACCURACY_BAR

WORKERS_ENV = "LENGEN_SWEEP_WORKERS"
# The preset sweep: 3 seeds × 4 offsets × RoPE and learned positions at the default size (scripts.build_presets).
PRESET_GRID = SweepGrid(encodings=("rope", "learned"), offsets=(1, 3, 5, 7), seeds=(0, 1, 2),
                        lengths=SWEEP_LENGTHS, samples=256)


SWEEP_TASKS = ("retrieval", *DELAY_TASKS)  # the page's tasks: the length task of the preset sweep, the delay tasks


def form_axes(task: str) -> list[Axis]:
    """The axes the form offers for `task`: a delay task's have its delay sets and no offset (its answer is at
    the delay); the retrieval task's every axis but the delay sets."""
    delay = task in DELAY_TASKS
    return [axis for axis in AXES if (axis.setting == "delays") == delay or (delay and axis.setting != "offset")]


def shown_values(axis: Axis, task: str) -> tuple:
    """What the form shows first: the shipped sweep of the task's kind (the preset sweep, the diversity sweep)."""
    return getattr(DIVERSITY_GRID if task in DELAY_TASKS else PRESET_GRID, axis.field)


def axis_key(axis: Axis, task: str) -> str:
    """The form field's key: 'sweep-offsets' for the retrieval task, 'sweep-delay-copy-delay_sets' for a delay task."""
    return f"sweep-{task}-{axis.field}" if task in DELAY_TASKS else f"sweep-{axis.field}"


def axis_text(axis: Axis, values) -> str:
    return axis.separator.join(map(str, values))


def numbers(text: str, label: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise SweepError(f"{label}: give whole numbers separated by commas, got {text!r}") from None


def form_grid(task: str, chosen: dict[Axis, object], samples: int, longest: int) -> SweepGrid:
    """The grid the form describes; `SweepError` (or `ConfigError`) says what is wrong and what is allowed,
    before anything runs. A delay task's grid is the diversity sweep's base with the task; each cell's
    delays must fit each training length."""
    values = {}
    for axis, value in chosen.items():
        if axis.kind is str and axis.setting == "delays":
            values[axis.field] = tuple(part.strip() for part in str(value).split(axis.separator) if part.strip())
        elif axis.kind is str:
            values[axis.field] = tuple(value)
        else:
            values[axis.field] = numbers(str(value), axis.label)
    if task in DELAY_TASKS:
        base = {**dict(DIVERSITY_GRID.base), "task": task}
        grid = SweepGrid(**values, samples=samples, lengths=DIVERSITY_GRID.lengths, base=base)
    else:
        grid = SweepGrid(**values, samples=samples, lengths=tuple(n for n in SWEEP_LENGTHS if n <= longest))
    for cell in grid.cells():  # a cell that cannot be a run is refused now, not reported after the sweep
        try:
            cell_config(grid, cell)
        except ConfigError as error:
            named = ("train_length", "delays") if task in DELAY_TASKS else ("offset", "train_length")
            where = ", ".join(f"{key} {value}" for key, value in cell.items() if key in named)
            raise SweepError(f"the cell with {where}: {error}") from None
    return grid


def is_delay_sweep(result: SweepResult) -> bool:
    return result.grid.delay_sets != NO_DELAYS


def shown_first(results: list[SweepResult | None], delay_task: bool) -> int:
    """Which sweep the Show choice starts on: the server's last one (after the two shipped) when it is of the
    task's kind, else the shipped one of that kind (the length sweep first, the diversity sweep second)."""
    if len(results) > 2 and results[-1] is not None and is_delay_sweep(results[-1]) == delay_task:
        return len(results) - 1
    return int(delay_task)


def encoding_colour(present) -> alt.Color:
    """One colour per encoding, the same on every chart; the legend lists only the encodings present."""
    domain = [name for name in ENCODING_RECORDS if name in set(present)]
    return alt.Color("encoding:N", title="encoding",
                     scale=alt.Scale(domain=domain, range=[encoding_record(name).colour for name in domain]))


@dataclass
class RunningSweep:
    grid: SweepGrid
    owner: str
    cancel: threading.Event
    progress: SweepProgress | None = None
    result: SweepResult | None = None
    error: str | None = None
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class SweepRunner:
    """The server's one sweep at a time (a thread running `run_sweep` on the local backend)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: RunningSweep | None = None

    def start(self, grid: SweepGrid, owner: str) -> RunningSweep:
        """Start `grid` (priced first: `BudgetError`); `RuntimeError` if another sweep is running."""
        check_sweep(grid)
        with self._lock:
            if self.current is not None and self.current.running:
                raise RuntimeError("another sweep is running on this server; watch it below, or wait for it to end")
            sweep = RunningSweep(grid, owner, threading.Event())
            sweep.thread = threading.Thread(target=self._run, args=(sweep,), name="lengen-sweep", daemon=True)
            self.current = sweep
            sweep.thread.start()
        return sweep

    @staticmethod
    def _run(sweep: RunningSweep) -> None:
        def report(progress: SweepProgress) -> None:
            sweep.progress = progress

        try:
            sweep.result = run_sweep(sweep.grid, default_root(), workers=env_whole_number(WORKERS_ENV, 1),
                                     progress=report, cancel=sweep.cancel)
        except Exception as error:  # shown on the page; the server goes on  # noqa: BLE001
            sweep.error = f"{type(error).__name__}: {' '.join(str(error).split())}"


@st.cache_resource(show_spinner=False)
def sweep_runner() -> SweepRunner:
    return SweepRunner()


@st.cache_data(show_spinner=False)
def preset_result() -> SweepResult | None:
    return stored_sweep(PRESET_GRID, PRESET_ROOT)


def measured_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of cells that have results (no error)."""
    return table[table.get("error", pd.Series(index=table.index, dtype=object)).isna()] if "error" in table else table


FACET_WIDTH = 700  # pixels for all panels of a row: readable in the main area of a 1,280 px window


def accuracy_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Accuracy against length, one panel per encoding on a shared y axis: the mean over its runs, the band
    from the lowest to the highest run (seeds and offsets pooled), chance (1/V) dashed."""
    rows = measured_rows(table).dropna(subset=["accuracy"])
    summary = (rows.assign(chance=1 / rows["vocab_size"])
               .groupby(["encoding", "length"], as_index=False)
               .agg(mean=("accuracy", "mean"), low=("accuracy", "min"), high=("accuracy", "max"),
                    runs=("run_id", "nunique"), chance=("chance", "mean")))
    encodings = [name for name in ENCODING_RECORDS if name in set(summary["encoding"])]
    columns = min(len(encodings), 2) or 1  # two panels a row, so a panel keeps half the width at least
    x = alt.X("length:Q", scale=alt.Scale(type="log", base=2), title="test length n (log scale)",
              axis=alt.Axis(labelAngle=-45, labelOverlap=True, format=",d"))
    colour = encoding_colour(summary["encoding"]).legend(None)  # the panel's title names the encoding
    band = alt.Chart().mark_area(opacity=0.25).encode(x=x, y="low:Q", y2="high:Q", color=colour)
    line = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("mean:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])), color=colour,
        tooltip=[alt.Tooltip("encoding:N", title="encoding"), alt.Tooltip("length:Q", title="length", format=",d"),
                 alt.Tooltip("mean:Q", title="mean accuracy", format=".3f"),
                 alt.Tooltip("low:Q", title="lowest run", format=".3f"),
                 alt.Tooltip("high:Q", title="highest run", format=".3f"), alt.Tooltip("runs:Q", title="runs")])
    chance = alt.Chart().mark_rule(strokeDash=[2, 3], color="#555").encode(y="mean(chance):Q")
    panel_width = FACET_WIDTH // columns - 40 * (columns - 1)
    return (alt.layer(band, line, chance, data=summary)
            .properties(width=panel_width, height=280)
            .facet(facet=alt.Facet("encoding:N", sort=encodings, title=None,
                                   header=alt.Header(labelFontSize=14, labelFontWeight="bold")), columns=columns)
            .resolve_scale(y="shared"))


PER_RUN_COLUMNS = ["run_id", "offset", "seed", "learned", "m_out", "predicted_horizon", "measured_horizon",
                   "argmax_offset"]


def picked_runs(event) -> set[str]:
    """The run ids picked in the collapse plot (its point selection `runs`); empty when none is."""
    if not event:
        return set()
    return {point["run_id"] for point in event.selection.get("runs", []) if "run_id" in point}


def per_run_rows(cells: pd.DataFrame, picked: set[str]) -> pd.DataFrame:
    """The RoPE runs' figures, one row a run: the picked runs only when some are picked."""
    rows = cells[cells["encoding"].eq("rope")][PER_RUN_COLUMNS]
    return rows[rows["run_id"].isin(picked)] if picked else rows


def picked_caption(cells: pd.DataFrame, picked: set[str]) -> str:
    if not picked:
        return ("Click a point of the collapse to pick its run (shift-click for more): the table keeps its row and "
                "the two charts below bring its points forward. Double-click the plot to show every run again.")
    rows = cells[cells["run_id"].isin(picked)].sort_values(["offset", "seed"])
    named = ", ".join(f"k {r.offset} seed {r.seed}" for r in rows.itertuples())
    rows_below = "its row below" if len(rows) == 1 else "their rows below"
    return (f"Picked {len(rows)} run{'s' * (len(rows) != 1)} ({named}): {rows_below}, and in the two charts under it "
            "the other runs fade. Double-click the plot to show every run.")


def highlight(picked: set[str], shown: float = 0.7) -> alt.OpacityValue | dict:
    """Opacity for a run's mark: the picked runs forward and the others faded, or every run alike."""
    if not picked:
        return alt.value(shown)
    return alt.condition(alt.FieldOneOfPredicate(field="run_id", oneOf=sorted(picked)), alt.value(0.95),
                         alt.value(0.12))


def argmax_chart(cells: pd.DataFrame, picked: set[str] = frozenset()) -> alt.Chart:
    """The carrier's argmax offset against the requested offset, every run; the diagonal is 'peaks at k'.
    Runs picked in the collapse plot are drawn forward, the others faded."""
    rows = cells.dropna(subset=["argmax_offset"])
    top = int(max(rows["offset"].max(), rows["argmax_offset"].max(), 1)) + 1
    diagonal = alt.Chart(pd.DataFrame({"k": [0, top]})).mark_line(strokeDash=[4, 4], color="#888").encode(
        x="k:Q", y="k:Q")
    encodings = list(dict.fromkeys(rows["encoding"]))
    spread = {name: (i - (len(encodings) - 1) / 2) * 0.18 for i, name in enumerate(encodings)}  # side by side at each k
    rows = rows.assign(shown_at=rows["offset"] + rows["encoding"].map(spread))
    points = alt.Chart(rows).mark_circle(size=90).encode(
        opacity=highlight(picked),
        x=alt.X("shown_at:Q", title="requested offset k (encodings side by side)", scale=alt.Scale(domain=[0, top])),
        y=alt.Y("argmax_offset:Q", title="carrier's argmax offset", scale=alt.Scale(domain=[0, top])),
        color=encoding_colour(rows["encoding"]),
        tooltip=[alt.Tooltip("encoding:N", title="encoding"), alt.Tooltip("offset:Q", title="offset k"),
                 alt.Tooltip("seed:Q", title="seed"), alt.Tooltip("argmax_offset:Q", title="carrier's argmax offset"),
                 alt.Tooltip("carrier_margin:Q", title="margin of s(k) (nats)", format=".2f"),
                 alt.Tooltip("run_id:N", title="run")])
    return (diagonal + points).properties(height=300)


def margin_chart(cells: pd.DataFrame, picked: set[str] = frozenset()) -> alt.Chart:
    """Each run's m_out against its predicted horizon (log); runs picked in the collapse plot forward."""
    rows = cells.dropna(subset=["predicted_horizon"]).assign(m_out=lambda t: t["m_out"].astype(float))
    return alt.Chart(rows).mark_circle(size=90).encode(
        opacity=highlight(picked),
        x=alt.X("m_out:Q", title="m_out (nats; blank: no law fitted)", scale=alt.Scale(zero=False)),
        y=alt.Y("predicted_horizon:Q", scale=alt.Scale(type="log", base=2), title="predicted horizon (tokens)"),
        color=encoding_colour(rows["encoding"]), shape=alt.Shape("offset:N"),
        tooltip=[alt.Tooltip("encoding:N", title="encoding"), alt.Tooltip("offset:Q", title="offset k"),
                 alt.Tooltip("seed:Q", title="seed"), alt.Tooltip("m_out:Q", title="m_out (nats)", format=".2f"),
                 alt.Tooltip("predicted_horizon:Q", title="horizon predicted (tokens)", format=",d"),
                 alt.Tooltip("measured_horizon:Q", title="horizon measured (tokens)", format=",d"),
                 alt.Tooltip("run_id:N", title="run")]).properties(height=300)


def collapse_frame(cells: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The collapse's points (lengen.sweep.collapse_points: the one filter), each with its own x and theory as the
    collapse placed it, the theoretical curve, and the summary (collapse_summary)."""
    found = sweep_collapse(cells)
    summary = collapse_summary(cells, found)
    if found.result is None:
        return pd.DataFrame(), pd.DataFrame(), summary
    points, scale = pd.DataFrame(list(found.points)), found.result.scale
    grid = np.geomspace(max(points["x"].min() / 2, 1e-9), points["x"].max() * 2, 120)
    curves = pd.concat([pd.DataFrame({"x": grid, "accuracy": vote_accuracy(factor * grid, int(V)), "vocab_size": int(V),
                                      "curve": name})
                        for V in sorted(points["vocab_size"].unique())
                        for name, factor in ((f"vote model, scale fitted (s = {scale:,.0f})", scale),
                                             ("vote model, m_out as it is", 1.0))])
    return points, curves, summary


def collapse_chart(points: pd.DataFrame, curves: pd.DataFrame) -> alt.Chart:
    """Accuracy against the scaled length, the vote model's master curve drawn; a click or a box selects runs."""
    pick = alt.selection_point(fields=["run_id"], name="runs", on="click")
    x = alt.X("x:Q", scale=alt.Scale(type="log"), title="scaled length (n − 1)·e^(−2·m_out)/V (log scale)")
    curve = alt.Chart(curves).mark_line(color="#333").encode(
        x=x, y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1])), detail="vocab_size:N",
        strokeDash=alt.StrokeDash("curve:N", title="master curve", legend=alt.Legend(orient="bottom", labelLimit=400)))
    dots = alt.Chart(points).mark_circle(size=70).encode(
        x=x, y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("offset:N", title="offset k"), shape=alt.Shape("seed:N"),
        opacity=alt.condition(pick, alt.value(0.9), alt.value(0.15)),
        tooltip=[alt.Tooltip("run_id:N", title="run"), alt.Tooltip("offset:Q", title="offset k"),
                 alt.Tooltip("seed:Q", title="seed"), alt.Tooltip("length:Q", title="length", format=",d"),
                 alt.Tooltip("accuracy:Q", title="accuracy", format=".3f"),
                 alt.Tooltip("m_out:Q", title="m_out (nats)", format=".2f"),
                 alt.Tooltip("x:Q", title="scaled length", format=".3~g")],
    ).add_params(pick)
    return (curve + dots).properties(height=360)


def accuracy_caption(table: pd.DataFrame) -> str:
    """What this sweep's curves show, per encoding, from its numbers: the measured horizons and the
    accuracy beyond 4× the training length against chance."""
    rows = measured_rows(table).dropna(subset=["accuracy"])
    parts = []
    for encoding, group in rows.groupby("encoding"):
        runs = group.drop_duplicates("run_id")
        horizons = runs["measured_horizon"].dropna().astype(int)
        beyond = group[group["length"] >= 4 * group["train_length"]]
        chance = float((1 / runs["vocab_size"]).mean())
        text = f"{encoding}: {len(runs)} run{'s' * (len(runs) != 1)}"
        longest = int(group["length"].max())
        reach = lambda n, longest=longest: f"≥ {n:,} (the longest measured)" if n >= longest else f"{n:,}"
        if len(horizons) == 1:
            text += f", measured horizon (accuracy ≥ {ACCURACY_BAR:g}) {reach(int(horizons.iloc[0]))} tokens"
        elif len(horizons) and horizons.min() == horizons.max():
            text += f", measured horizon (accuracy ≥ {ACCURACY_BAR:g}) {reach(int(horizons.min()))} tokens on every run"
        elif len(horizons):
            text += (f", measured horizon (accuracy ≥ {ACCURACY_BAR:g}) median {reach(int(horizons.median()))} tokens, from "
                     f"{horizons.min():,} to {reach(int(horizons.max()))}")
        if not beyond.empty:
            text += f"; beyond 4× the training length accuracy {beyond['accuracy'].mean():.2f} on average (chance {chance:.3f})"
        parts.append(text)
    return "; ".join(parts) + "." if parts else "No cell of this sweep has results yet."


def argmax_caption(cells: pd.DataFrame) -> str:
    rows = cells.dropna(subset=["argmax_offset"])
    parts = []
    for encoding, group in rows.groupby("encoding"):
        on = int((group["argmax_offset"] == group["offset"]).sum())
        parts.append(f"{encoding}: {on} of {len(group)} runs peak at the requested k")
    return "; ".join(parts) + ". A run on the diagonal points its carrier at k; off it, the run found another rule or none." \
        if parts else "No carrier was measured."


def margin_caption(cells: pd.DataFrame) -> str:
    """How far m_out orders the runs' predicted horizons, in this sweep (Spearman's rank correlation per encoding)."""
    parts = []
    for encoding, group in cells.dropna(subset=["predicted_horizon"]).groupby("encoding"):
        both = group.dropna(subset=["m_out"])
        if len(both) >= 3:
            rho = both["m_out"].astype(float).rank().corr(both["predicted_horizon"].astype(float).rank())
            parts.append(f"{encoding}: rank correlation of m_out with the predicted horizon {rho:.2f} over {len(both)} runs")
        else:
            parts.append(f"{encoding}: {len(group)} run{'s' * (len(group) != 1)}, {len(both)} with a fitted m_out "
                         "(too few to correlate)")
    return ("; ".join(parts) + ". m_out is the far keys' average weight; the horizon is decided by the heaviest few, "
            "so the two need not agree run by run.") if parts else "No run has a predicted horizon."


def collapse_caption(summary: dict) -> str:
    """The collapse in this sweep's numbers, saying so when the scaled length does not gather the runs."""
    if not summary["points"]:
        return f"No collapse: {summary['note']}."
    gathered = summary["spread_scaled"] < summary["spread_raw"]
    verdict = ("the scaled length gathers the runs onto one curve" if gathered else
               "the scaled length does not gather these runs better than raw length: this sweep does not show the collapse")
    scale, shape = summary["scale"], summary["rms"]
    theory = (f"with m_out as it is the vote model misses them by {summary['rms_unscaled']:.2f} (RMS); with one scale "
              f"fitted to all of them (they lose accuracy as if they had {scale:,.0f} times the far keys, the weight of "
              f"a few near-recurrences rather than the average far key) they sit {shape:.3f} from it, against "
              f"{summary['spread_scaled']:.3f} around the best decreasing curve: "
              + ("as close as any curve gets, so the vote model's shape holds" if shape <= 1.25 * summary["spread_scaled"]
                 else "the vote model's shape holds roughly" if shape <= 2 * summary["spread_scaled"]
                 else "too far for the vote model's shape to describe them"))
    return (f"{summary['note']}: spread around the best decreasing curve {summary['spread_scaled']:.3f} in the scaled "
            f"length against {summary['spread_raw']:.3f} in raw length, so {verdict}. {theory[0].upper()}{theory[1:]}. "
            "Learned positions have no fitted margin (at chance past L_train) and are not placed.")


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """The table as a Parquet file, as the sweep's folder keeps it (table.parquet)."""
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return buffer.getvalue()


def progress_text(progress: SweepProgress | None, total: int) -> str:
    if progress is None:
        return f"starting: {total} cells"
    left = "" if progress.seconds_left is None or not math.isfinite(progress.seconds_left) else \
        f", about {progress.seconds_left:.0f} s left"
    errors = f", {progress.errors} failed" if progress.errors else ""
    return f"{progress.done} of {progress.total} cells done{errors}{left}"

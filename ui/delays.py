"""The Delays page's pieces: a delay-task run's accuracy against the delay at its training length, the
delays it trained on shaded apart from those it never saw, its attention on the source (the carrier's
view of the result), and captions read from this run's numbers against the claim (C10,
lengen_core.claims.delay_expectation)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from lengen.budget import check_transfer
from lengen.presets import DIVERSITY_GRID, PRESET_ROOT
from lengen.sweep import SweepResult, cell_config, stored_sweep
from lengen_core.analysis.delays import DELAY_SAMPLES, DELAY_SEED, DelayCurve, delay_curve
from lengen_core.claims import DELAY_CLAIM, DELAY_OUTCOME_WORDS, delay_expectation, delay_outcome, encoding_record
from lengen_core.config import DELAY_TASKS, ConfigError, format_delays, with_changes
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import Run
from lengen_core.transfer import TRANSFER_PATIENCE, TRANSFER_PHASES, Transfer, transfer_from
from ui.charts.common import HEIGHT, REFERENCE
from ui.runs import load_run, stored_configs
from ui.widgets import chart, refusal

SEEN, UNSEEN = "#2ca02c", "#ff7f0e"  # the delays a run trained on, and those it never saw
SEEN_SHADE = "rgba(44, 160, 44, 0.12)"
SAMPLE_CHOICES = (64, 128, 256, 512)

def delay_run_ids() -> list[str]:
    """Every stored run of a delay task (the person's and the shipped ones)."""
    return [run_id for run_id, config in stored_configs().items() if config.task.task in DELAY_TASKS]


@st.cache_data(show_spinner="Reading every delay…", max_entries=128)
def curve(run_id: str, samples: int = DELAY_SAMPLES, seed: int = DELAY_SEED) -> DelayCurve:
    """The run's accuracy, source mass and margin at every delay its context holds (lengen_core.analysis.delays)."""
    run = load_run(run_id)
    return delay_curve(run.model, run.config, None, samples, seed)


def curve_table(result: DelayCurve) -> pd.DataFrame:
    return pd.DataFrame([{"delay": p.delay, "seen": p.seen, "accuracy": p.accuracy, "accuracy_low": p.accuracy_low,
                          "accuracy_high": p.accuracy_high, "source_mass": p.source_mass,
                          "source_margin": p.source_margin, "samples": result.samples} for p in result.points])


def _shade(figure: go.Figure, delays: tuple[int, ...], rows: int) -> None:
    """A band behind each run of consecutive training delays, on every row."""
    for part in format_delays(delays).split(","):
        low, _, high = part.partition("-")
        for row in range(1, rows + 1):
            figure.add_vrect(x0=int(low) - 0.5, x1=int(high or low) + 0.5, fillcolor=SEEN_SHADE, line_width=0,
                             layer="below", row=row, col=1)


def delay_figure(result: DelayCurve) -> go.Figure:
    """Accuracy against the delay (bars, seen green on a shaded band, unseen red, with 95% intervals), and
    under it the carrier head's attention on the source at each delay."""
    table = curve_table(result)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
                           subplot_titles=("Accuracy at the query", f"Attention on the source (head {result.head})"))
    for seen, color, name in ((True, SEEN, "trained delays"), (False, UNSEEN, "unseen delays")):
        part = table[table["seen"] == seen]
        if part.empty:
            continue
        figure.add_bar(x=part["delay"], y=part["accuracy"], marker_color=color, name=name, row=1, col=1,
                       error_y=dict(type="data", symmetric=False, array=part["accuracy_high"] - part["accuracy"],
                                    arrayminus=part["accuracy"] - part["accuracy_low"], thickness=1, width=2),
                       hovertemplate="delay %{x}: accuracy %{y:.3f}" + f" ({result.samples} sequences)<extra>{name}"
                                     "</extra>")
        figure.add_scatter(x=part["delay"], y=part["source_mass"], mode="markers", marker=dict(color=color, size=8),
                           name=f"{name}: attention on the source", showlegend=False, row=2, col=1,
                           hovertemplate="delay %{x}: weight on the source %{y:.3f}<extra></extra>")
    figure.add_scatter(x=table["delay"], y=table["source_mass"], mode="lines", line=dict(color=REFERENCE, width=1),
                       name="attention on the source", row=2, col=1, hoverinfo="skip")
    figure.add_hline(y=result.chance, line=dict(color=REFERENCE, dash="dot"), row=1, col=1,
                     annotation_text=f"chance {result.chance:.2f}", annotation_position="top left")
    figure.add_hline(y=ACCURACY_BAR, line=dict(color=REFERENCE, dash="dash", width=1), row=1, col=1,
                     annotation_text=f"bar {ACCURACY_BAR:g}", annotation_position="bottom left")
    _shade(figure, result.run_delays, 2)
    figure.update_layout(height=int(HEIGHT * 1.5), margin=dict(l=60, r=20, t=50, b=60), bargap=0.15,
                         legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0, xanchor="left"),
                         hoverlabel=dict(namelength=-1))
    figure.update_yaxes(range=[0, 1.05], title_text="accuracy", row=1, col=1)
    figure.update_yaxes(range=[0, 1.05], title_text="weight", row=2, col=1)
    figure.update_xaxes(title_text=f"delay d (source d places before the query; length {result.length})", row=2,
                        col=1, dtick=2 if len(table) <= 40 else None)
    return figure


def delay_caption(run: Run, result: DelayCurve) -> str:
    """What this run shows at its own and at unseen delays, from its numbers, against the claim."""
    config = run.config
    seen, unseen = result.mean_accuracy(True), result.mean_accuracy(False)
    learned = run.verdict.learned if run.verdict is not None else (seen or 0) >= ACCURACY_BAR
    text = (f"On its training delays {config.task.delays} this run answers {seen:.2f} of the queries (chance "
            f"{result.chance:.2f}, {result.samples} sequences a delay)")
    if unseen is None:
        return text + "; every delay the context holds was in training, so there is no unseen delay to read."
    points = result.unseen()
    worst = min(points, key=lambda p: p.accuracy)
    text += (f"; on the {len(points)} delays it never saw, {unseen:.2f} on average (lowest {worst.accuracy:.2f} at "
             f"delay {worst.delay}).")
    held = [p.delay for p in points if p.accuracy >= ACCURACY_BAR]
    if held and len(held) < len(points):
        text += (f" {len(held)} unseen delay{'s reach' if len(held) > 1 else ' reaches'} the bar ({format_delays(held)}"
                 f"{': next to the trained range' if all(min(abs(d - s) for s in result.run_delays) == 1 for d in held) else ''}).")
    mass_seen = sum(p.source_mass for p in result.seen()) / len(result.seen())
    mass_unseen = sum(p.source_mass for p in points) / len(points)
    text += (f" Its head puts {mass_seen:.2f} of its attention on the source at the trained delays and "
             f"{mass_unseen:.2f} at the unseen ones")
    if mass_seen > 2 * mass_unseen and mass_seen > 0.3:
        text += ": a kernel that peaks at the delays it trained on, which is why the unseen ones fail."
    elif mass_unseen >= 0.5:
        text += ": it finds the source wherever it is, by what the source holds, not where it is."
    else:
        text += "."
    if config.task.task == "delay-copy":
        text += (f" (In delay-copy the source has L − 1 − d content tokens before it: at delay {result.length - 1} "
                 "it is the only one, so the longest delays need no sense of order to answer.)")
    outcome = delay_outcome(learned, unseen, result.chance)
    expected = delay_expectation(config.task.task, config.model.encoding, config.model.attention,
                                 config.model.minimal)
    if expected is None:
        return text + f" The lab makes no claim ({DELAY_CLAIM}) for this kind of run."
    if outcome == expected:
        return text + f" As {DELAY_CLAIM} expects: a {config.model.encoding} head {DELAY_OUTCOME_WORDS[expected]}."
    return (text + f" This run contradicts {DELAY_CLAIM}, which expects that a {config.model.encoding} head "
            f"{DELAY_OUTCOME_WORDS[expected]}; this one {DELAY_OUTCOME_WORDS[outcome]}.")


# Data diversity: how many delays training saw, from the shipped sweep (lengen.presets.DIVERSITY_GRID).


def preset_diversity() -> SweepResult | None:
    """The shipped diversity sweep, read back (None when its cells are missing)."""
    return stored_sweep(DIVERSITY_GRID, PRESET_ROOT)


DIVERSITY_MEASURES = {"mean_seen": "trained delays", "mean_near_unseen": "unseen, within 2 of a trained one",
                      "mean_unseen": "every unseen delay"}


def diversity_table(cells: list[dict]) -> pd.DataFrame:
    """One row per learned-or-not cell: encoding, seed, delays, how many, and its three means."""
    rows = [{key: cell.get(key) for key in ("encoding", "seed", "delays", "delay_count", "learned", *DIVERSITY_MEASURES)}
            for cell in cells if "error" not in cell]
    return pd.DataFrame(rows)


def diversity_figure(table: pd.DataFrame) -> go.Figure:
    """Mean accuracy against the number of training delays, per encoding (line style) and measure (colour),
    averaged over seeds; every seed as a faint point."""
    figure = go.Figure()
    colours = {"mean_seen": SEEN, "mean_near_unseen": UNSEEN, "mean_unseen": REFERENCE}
    for encoding, part in table.groupby("encoding", sort=False):
        for measure, label in DIVERSITY_MEASURES.items():
            mean = part.groupby("delay_count")[measure].mean().reset_index()
            figure.add_scatter(x=mean["delay_count"], y=mean[measure], mode="lines+markers",
                               line=dict(color=colours[measure], dash=encoding_record(encoding).dash),
                               name=f"{encoding}: {label}", legendgroup=encoding,
                               hovertemplate=f"{encoding}, {label}: " + "%{y:.2f} with %{x} training delays"
                                             "<extra>mean over seeds</extra>")
            figure.add_scatter(x=part["delay_count"], y=part[measure], mode="markers", showlegend=False,
                               marker=dict(color=colours[measure], size=5, opacity=0.35), legendgroup=encoding,
                               hovertemplate=f"{encoding}, {label}: " + "%{y:.2f}<extra>one seed</extra>")
    figure.update_layout(height=HEIGHT + 80, margin=dict(l=60, r=20, t=30, b=160),
                         legend=dict(orientation="h", yanchor="top", y=-0.3, x=0, xanchor="left"),
                         hoverlabel=dict(namelength=-1))
    counts = sorted(table["delay_count"].unique())
    sets = ", ".join(dict.fromkeys(table.sort_values("delay_count")["delays"]))
    figure.update_xaxes(title_text=f"delays training saw ({sets})", type="log",
                        tickvals=counts, ticktext=[str(c) for c in counts])
    figure.update_yaxes(title_text="mean accuracy", range=[0, 1.05])
    return figure


def diversity_caption(table: pd.DataFrame, what: str = "delay-copy, length 32") -> str:
    """What the shipped sweep shows, from its numbers: does seeing more delays carry a head to the unseen ones?"""
    fewest, most = int(table["delay_count"].min()), int(table["delay_count"].max())
    parts = []
    for encoding, part in table.groupby("encoding", sort=False):
        low = part[part["delay_count"] == fewest]
        high = part[part["delay_count"] == most]
        if low["mean_unseen"].isna().all() or high["mean_unseen"].isna().all():
            parts.append(f"{encoding}: a set that covers every delay of the context leaves no unseen delay to read")
            continue
        parts.append(f"{encoding} {low['mean_near_unseen'].mean():.2f} → {high['mean_near_unseen'].mean():.2f} next to "
                     f"its range and {low['mean_unseen'].mean():.2f} → {high['mean_unseen'].mean():.2f} over every unseen "
                     "delay")
    best = table["mean_unseen"].max()
    verdict = (f"no cell reaches the bar ({ACCURACY_BAR:g}) over its unseen delays: more delays widen the trained "
               "range, they do not teach the distances outside it" if best < ACCURACY_BAR else
               f"a cell reaches the bar ({ACCURACY_BAR:g}) over its unseen delays: seeing more delays carried it")
    return (f"From {fewest} training delay{'s' * (fewest > 1)} to {most} ({what}, {table['seed'].nunique()} seed"
            f"{'s' * (table['seed'].nunique() > 1)} a point): {'; '.join(parts)}. The best cell holds {best:.2f} over its unseen delays: {verdict}. "
            "The faint points are the single seeds.")


# Transfer: the run's own delays are A (it is trained on them already); a person names delays B.


def default_after(run: Run) -> str:
    """Delays B to suggest: the unseen block just past the run's longest delay, as long as its own range."""
    own, L = run.config.task.delay_set, run.config.task.train_length
    low = own[-1] + 1
    if low >= L:
        return format_delays([d for d in range(1, L) if d not in own][:8]) or format_delays(own)
    return format_delays(range(low, min(L - 1, low + len(own)) + 1))


def transfer_config(run: Run, after: str, steps: int):
    """The run's config on delays B for at most `steps` steps; `ConfigError` says what is wrong with B or the steps."""
    if not isinstance(after, str) or not after.strip():
        raise ConfigError(f"name delays B, e.g. {default_after(run)}")
    if not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"most steps on B {steps!r}: allowed a whole number of steps, at least 1")
    config = with_changes(run.config, delays=after.strip(), steps=steps, continues="")
    if set(config.task.delay_set) <= set(run.config.task.delay_set):
        raise ConfigError(f"delays B ({config.task.delays}) are all among the delays this run trained on "
                          f"({run.config.task.delays}): name at least one it never saw, e.g. {default_after(run)}")
    return config


def measure_transfer(run: Run, after: str, steps: int, told=None) -> Transfer:
    """Priced first (`check_transfer`: two trainings on B, held to the request's time), then measured from the
    run's weights (`lengen_core.transfer.transfer_from`); `ConfigError` (and `BudgetError`) before any work."""
    config = transfer_config(run, after, steps)
    check_transfer(config)
    return transfer_from(run, config.task.delays, steps, "cpu", TRANSFER_PATIENCE, told)


def transfer_table(result: Transfer) -> pd.DataFrame:
    rows = [("from scratch", result.steps_from_scratch), (f"after delays {result.before}", result.steps_from_pretrained)]
    return pd.DataFrame([{"start": start, "delays_b": result.after, "steps_to_learn": steps,
                          "learned": steps is not None, "budget": result.budget, "bar": result.bar,
                          "patience": result.patience, "pretrain_steps": result.pretrain_steps,
                          "pretrain_accuracy_on_b": result.pretrain_accuracy_on_b} for start, steps in rows])


def transfer_figure(result: Transfer) -> go.Figure:
    """Steps to learn delays B, from scratch and from the run's weights; a side that never learned is drawn
    at the budget, hatched, and says so."""
    table = transfer_table(result)
    steps = [row.steps_to_learn if row.learned else row.budget for row in table.itertuples()]
    texts = [f"{s:,} steps" if row.learned else f"not within {row.budget:,}" for s, row in zip(steps, table.itertuples(),
                                                                                                 strict=True)]
    figure = go.Figure(go.Bar(y=table["start"], x=steps, orientation="h", marker_color=[REFERENCE, SEEN],
                              marker_pattern_shape=["" if learned else "/" for learned in table["learned"]],
                              text=texts, textposition="outside", cliponaxis=False, showlegend=False,
                              hovertemplate="%{y}: %{text}" + f"<extra>delays {result.after}</extra>"))
    if not table["learned"].all():  # the budget is then the end of a bar: draw it
        figure.add_vline(x=result.budget, line=dict(color=REFERENCE, dash="dot"),
                         annotation_text=f"budget {result.budget:,}", annotation_position="top left")
    figure.update_layout(height=HEIGHT - 120, margin=dict(l=150, r=30, t=40, b=60), bargap=0.35)
    figure.update_xaxes(title_text=f"steps on delays {result.after} until the batch accuracy holds ≥ {result.bar:g} "
                                   f"for {result.patience} steps", range=[0, 1.3 * max(steps)])
    return figure


def transfer_caption(result: Transfer) -> str:
    """What this measurement shows, from its numbers."""
    said = lambda steps: f"{steps:,} steps" if steps is not None else f"not within {result.budget:,} steps"
    text = (f"Learning delays {result.after} took {said(result.steps_from_scratch)} from scratch and "
            f"{said(result.steps_from_pretrained)} from this run's weights (trained {result.pretrain_steps:,} steps "
            f"on delays {result.before}, which alone answer {result.pretrain_accuracy_on_b:.2f} of delays "
            f"{result.after}).")
    speedup = result.speedup
    bound = result.steps_from_scratch is None or result.steps_from_pretrained is None
    if result.steps_from_scratch is None and result.steps_from_pretrained is None:
        return text + " Neither learned within the budget, so this run says nothing about transfer: allow more steps."
    if speedup > 1:
        word = f"positive transfer: training on {result.before} first made {result.after} ×{speedup:.1f} faster"
    elif speedup < 1:
        word = f"negative transfer: training on {result.before} first made {result.after} ×{1 / speedup:.1f} slower"
    else:
        word = "no transfer: the same number of steps either way"
    return text + f" {word[0].upper()}{word[1:]}{' (at least: one side never learned)' if bound else ''}."


def transfer_section(run: Run) -> None:
    """The form (delays B, steps on B), the price check, a progress bar while the two trainings run, the chart."""
    st.subheader("Transfer: does training on these delays speed up others?")
    st.markdown(f"This run trained on delays **{run.config.task.delays}** (A). Name delays **B**: the lab trains the "
                "run's config on B twice, from this run's weights and from scratch (same seed, same everything "
                f"else), and counts the steps until each holds {ACCURACY_BAR:g} batch accuracy for "
                f"{TRANSFER_PATIENCE} steps. Fewer steps from A is positive transfer; more is negative.")
    left, right = st.columns(2)
    after = left.text_input("Delays B", value=default_after(run), key=f"transfer-after-{run.run_id}",
                            help=f"e.g. '9-16' or '3,12'; each 1 to {run.config.task.train_length - 1} (the run's "
                                 "length stays), at least one the run never trained on")
    steps = right.number_input("Most steps on B", 1, 100_000, run.config.train.steps, step=100,
                               key=f"transfer-steps-{run.run_id}",
                               help="Each training stops once it has learned; a side that never does counts this.")
    results = st.session_state.setdefault("delay-transfers", {})
    key = (run.run_id, after.strip(), int(steps))
    if st.button("Measure transfer", key=f"transfer-go-{run.run_id}", type="primary"):
        bar = st.progress(0.0, text="Pricing the measurement…")

        def told(phase: str, step: int, total: int) -> None:
            index = TRANSFER_PHASES.index(phase) - 1  # two phases here: from A, from scratch
            if step % 10 == 0 or step == total:
                bar.progress(min(1.0, (index + step / total) / 2), text=f"{phase}: step {step:,} of at most {total:,}")

        try:
            results[key] = measure_transfer(run, after, int(steps), told)
        except ConfigError as error:
            bar.empty()
            refusal("Transfer not measured", error)
            return
        bar.empty()
    result = results.get(key)
    if result is not None:
        chart(transfer_figure(result), transfer_caption(result), transfer_table(result), "delay-transfer",
              stem=run.run_id)



def diversity_view(result: SweepResult) -> None:
    """A delay sweep (the shipped diversity sweep or a person's): mean accuracy against how many delays training
    saw, its caption from the sweep's numbers, and its cells."""
    table = diversity_table(result.cells)
    failed = [cell for cell in result.cells if "error" in cell]
    if failed:
        st.warning(f"{len(failed)} of {len(result.cells)} cells failed; the rest are shown. " +
                   "; ".join(f"{c.get('encoding')} delays {c.get('delays')} seed {c.get('seed')}: {c['error']}"
                             for c in failed[:5]))
    if table.empty:
        st.info("No cell of this sweep has results to show.")
        return
    configs = [cell_config(result.grid, settings) for settings in result.grid.cells()]
    tasks = sorted({config.task.task for config in configs})
    lengths = sorted({config.task.train_length for config in configs})
    what = f"{' and '.join(tasks)}, length {', '.join(map(str, lengths))}"
    st.subheader("Data diversity: accuracy on unseen delays against how many delays training saw")
    chart(diversity_figure(table), diversity_caption(table, what), table, "delay-diversity", stem=result.sweep_id,
          key="sweep_id")
    st.dataframe(table, hide_index=True)


# Several delay runs on one chart (the distance lesson's first step).

OVERLAY_COLOURS = ("#1f77b4", "#d62728", "#7f7f7f", "#9467bd", "#2ca02c", "#8c564b")


def overlay_table(curves: dict[str, DelayCurve]) -> pd.DataFrame:
    return pd.concat([curve_table(result).assign(run=label) for label, result in curves.items()], ignore_index=True)


def overlay_figure(curves: dict[str, DelayCurve]) -> go.Figure:
    """Accuracy against the delay, one line per run, with its 95% band; the first run's trained delays shaded."""
    figure = go.Figure()
    for colour, (label, result) in zip(OVERLAY_COLOURS, curves.items(), strict=False):
        table = curve_table(result)
        figure.add_scatter(x=table["delay"], y=table["accuracy"], mode="lines+markers", name=label,
                           line=dict(color=colour), marker=dict(size=5),
                           error_y=dict(type="data", symmetric=False, array=table["accuracy_high"] - table["accuracy"],
                                        arrayminus=table["accuracy"] - table["accuracy_low"], thickness=1, width=0),
                           hovertemplate=f"{label}: " + "accuracy %{y:.3f} at delay %{x}<extra></extra>")
    first = next(iter(curves.values()))
    for part in format_delays(first.run_delays).split(","):
        low, _, high = part.partition("-")
        figure.add_vrect(x0=int(low) - 0.5, x1=int(high or low) + 0.5, fillcolor=SEEN_SHADE, line_width=0, layer="below",
                         annotation_text="trained delays", annotation_position="top left")
    figure.add_hline(y=first.chance, line=dict(color=REFERENCE, dash="dot"), annotation_text=f"chance {first.chance:.2f}",
                     annotation_position="bottom right")
    figure.update_layout(height=HEIGHT, margin=dict(l=60, r=20, t=40, b=60), hoverlabel=dict(namelength=-1),
                         legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left"))
    figure.update_yaxes(range=[0, 1.05], title_text="accuracy at the query")
    figure.update_xaxes(title_text=f"delay d (length {first.length})", dtick=2)
    return figure


def overlay_caption(curves: dict[str, DelayCurve]) -> str:
    """Each run's mean on its trained and its unseen delays, from its numbers, and which hold the unseen ones."""
    parts = []
    for label, result in curves.items():
        seen, unseen = result.mean_accuracy(True), result.mean_accuracy(False)
        parts.append(f"{label} {seen:.2f} on its trained delays and {unseen:.2f} on the unseen ones" if unseen is not None
                     else f"{label} {seen:.2f} (every delay trained)")
    chance = next(iter(curves.values())).chance
    holding = [label for label, result in curves.items() if (result.mean_accuracy(False) or 0) >= ACCURACY_BAR]
    learned = [label for label, result in curves.items() if (result.mean_accuracy(True) or 0) >= ACCURACY_BAR]
    said = (f"Learned their trained delays (≥ {ACCURACY_BAR:g}): {', '.join(learned) or 'none'}; held the unseen "
            f"ones: {', '.join(holding) or 'none'}.")
    return f"Mean accuracy (chance {chance:.2f}): {'; '.join(parts)}. {said}"

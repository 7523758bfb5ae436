"""Shared widgets: a chart with its caption and CSV export, messages for missing runs."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lengen.presets import transformer_presets
from lengen.store import StoreError
from lengen_core.config import DELAY_TASKS
from lengen_core.training import Run
from ui.address import stop
from ui.captions import common as captions
from ui.charts.export import export_config
from ui.charts.readable import readable
from ui.runs import await_first_visit, load_run
from ui.state import plain, select_run, selected_run_id, show_view, view_option

# Injected once by app.py. Metric labels and page links wrap instead of ending in "…", so none is cut; charts
# laid side by side in st.columns stack once the main area is too narrow for each to be read (two
# columns below 820 px of main area: a 1024 px screen with the sidebar open; three below 1200 px).
READABLE_CSS = """<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *, [data-testid="stPageLink-NavLink"] * {
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
}
/* A multiselect's chosen runs wrap onto more lines, each chip whole, instead of a row that scrolls out of
   its box; the options of an open selectbox wrap too, so a long run label is never cut. */
[data-testid="stMultiSelectTagsContainer"], [data-testid="stMultiSelectTagsContainer"] > [role="group"] {
    flex-wrap: wrap !important; overflow: visible !important; mask-image: none !important;
    -webkit-mask-image: none !important; max-width: 100% !important;
}
[data-testid="stMultiSelect"] [data-rac] { height: auto !important; max-height: none !important; }
[data-testid="stMultiSelectTagsContainer"] [data-tag] { max-width: 100% !important; height: auto !important; }
[data-testid="stMultiSelectTagsContainer"] [data-tag] > span {
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
}
[role="listbox"] [role="option"], [role="listbox"] [role="option"] * {
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important; height: auto !important;
}
[data-testid="stMainBlockContainer"] { container-type: inline-size; }
@container (max-width: 820px) {
    [data-testid="stHorizontalBlock"]:has([data-testid="stPlotlyChart"]) > [data-testid="stColumn"] {
        flex: 1 1 100% !important; width: 100% !important;
    }
}
@container (max-width: 1200px) {
    [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"]:nth-child(3)):has([data-testid="stPlotlyChart"])
    > [data-testid="stColumn"] { flex: 1 1 100% !important; width: 100% !important; }
}
</style>"""


def readable_layout() -> None:
    """The CSS above, for every page (call once per script run, from the router)."""
    st.html(READABLE_CSS)


# A chart on a projector (a lesson in presenter mode): its font, and its title drawn above it as text, since a
# legend in rows over the plot would cover a title inside it.
PRESENT_FONT = 14
SHORT_CHART = 250  # px: below it, a chart's y titles take two lines


def present_figure(figure: go.Figure, height: int) -> str:
    """Restyle `figure` for a projector: `height` px tall, its legend in a row over the plot, tight margins, no
    title inside it. Returns the title, for the caller to draw above the chart."""
    title = figure.layout.title.text or ""
    panel_titles = any((note.y or 0) >= 0.99 for note in figure.layout.annotations)  # subplots' titles, over the top
    # a label outside the plot's right edge (the chance line's) keeps the margin the figure gave it
    outside = any((note.x or 0) >= 1 and note.xanchor == "left" and str(note.xref).endswith("domain")
                  for note in figure.layout.annotations)
    figure.update_layout(title=None, height=height, font=dict(size=PRESENT_FONT),
                         legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom",
                                     font_size=PRESENT_FONT, traceorder="normal"),
                         margin=dict(l=55, r=max(10, figure.layout.margin.r or 0) if outside else 10,
                                     t=30 if panel_titles else 10, b=45))
    figure.update_xaxes(tickfont_size=PRESENT_FONT, title_font_size=PRESENT_FONT, title_standoff=4)
    figure.update_yaxes(tickfont_size=PRESENT_FONT, title_font_size=PRESENT_FONT, title_standoff=4,
                        automargin=True)  # the margin grows to hold wide ticks (10²) and the axis title
    if height < SHORT_CHART:  # a long y title is longer than a short plot is tall: two lines
        figure.for_each_yaxis(lambda axis: axis.update(title_text=_two_lines(axis.title.text or "")))
    return title


def _two_lines(text: str, longest: int = 16) -> str:
    """'horizon (× training length)' -> 'horizon (×<br>training length)': split at the space nearest the middle."""
    spaces = [i for i, c in enumerate(text) if c == " "]
    if len(text) <= longest or not spaces:
        return text
    middle = min(spaces, key=lambda i: abs(i - len(text) / 2))
    return f"{text[:middle]}<br>{text[middle + 1:]}"


def present_chart(figure: go.Figure, height: int | None, key: str, titled: bool = True) -> None:
    """The chart as `chart` draws it, or at `height` px for a projector with its title above it (or none: the
    small charts of a live training say what they are in their axes, legend and caption)."""
    if height is not None:
        title = present_figure(figure, height)
        if title and titled:
            st.markdown(f"**{title}**")
    st.plotly_chart(readable(figure), width="stretch", key=key, config=export_config(figure, key))


def chart(figure: go.Figure, look_for: str | captions.Caption, data: pd.DataFrame, name: str, stem: str | None = None,
          notes: DeltaGenerator | None = None, height: int | None = None, key: str = "run_id") -> None:
    """The chart, what to look for (a `Caption`'s lead, the rest in an expander under it; under the chart, or in `notes`: a lesson on a projector writes it
    beside the chart), and its data as CSV named after what it shows: `{stem}-{name}.csv`, the stem being the
    run id (or what else the chart is of, named by `key`: "sweep_id" for a sweep's), so a folder of downloads
    says which run each came from; the CSV's first column is that id too (`keyed`), so rows from several
    downloads stay apart in one table. With `height`, the chart is sized for a projector (`present_chart`)."""
    present_chart(figure, height, f"chart-{name}")
    where = st if notes is None else notes
    first, rest = _lead_and_rest(look_for, height is not None)
    where.caption(f"**What to look for:** {first}")
    if rest:  # the lead is read first; the rest of this run's reading is one click away, under it
        where.expander(MORE_LABEL).caption(rest)
    st.download_button(  # the CSV is written when the button is clicked, not on every rerun (a map's is 65k cells)
        "Download data (CSV)", lambda: keyed(data, stem, key).to_csv(index=False).encode(), file_name=csv_name(name, stem),
        mime="text/csv", key=f"csv-{name}", help="The numbers behind this chart, one row per point.",
    )


MORE_LABEL = "More on this chart"
PRESENT_CAPTION_CHARS = 240  # a projector's caption: the sentences that fit in this many characters, the rest folded


def _lead_and_rest(look_for: str | captions.Caption, projector: bool) -> tuple[str, str]:
    """A caption's lead and the rest: a `Caption`'s own (ui.captions.common); else, on a projector, the sentences
    that fit (`_lead`); else the whole text."""
    if hasattr(look_for, "lead"):
        return look_for.lead, look_for.more
    return _lead(look_for) if projector else (look_for, "")


def _lead(text: str) -> tuple[str, str]:
    """`text` split after the last sentence that ends within PRESENT_CAPTION_CHARS (the first sentence at least)."""
    ends = [i + 1 for i, c in enumerate(text) if c == "." and (i + 1 == len(text) or text[i + 1] == " ")]
    fitting = [i for i in ends if i <= PRESENT_CAPTION_CHARS] or ends[:1] or [len(text)]
    return text[:fitting[-1]], text[fitting[-1]:].strip()


def keyed(data: pd.DataFrame, stem: str | None, key: str = "run_id") -> pd.DataFrame:
    """`data` with `stem` in a first column named `key`, unless it has that column already (a table of several
    runs keys each row itself) or there is no stem."""
    if stem is None or key in data.columns:
        return data
    return pd.concat([pd.DataFrame({key: [stem] * len(data)}, index=data.index), data], axis=1)


def csv_name(name: str, stem: str | None = None) -> str:
    """'rope-softmax-retrieval-s0-ce9f6b-dilution.csv' for stem 'rope-softmax-retrieval-s0-ce9f6b', name 'dilution'."""
    return f"{stem}-{name}.csv" if stem else f"{name}.csv"


def selected_run() -> Run | None:
    """The selected run, or None with a message saying what to do."""
    run_id = selected_run_id()
    if run_id is None:
        st.info("No run selected: pick a preset on the Start page or train one on the Train page.")
        return None
    try:
        run = load_run(run_id)
    except StoreError as error:
        st.warning(f"The selected run cannot be opened: {error}. Pick another in the sidebar.")
        return None
    await_first_visit(run_id)  # a run just trained: its page numbers are coming (said while they do)
    return run


def require_length_task(run: Run) -> None:
    """Stop the page with a pointer to Delays for a run of a delay task: its length never changes, so the
    pages that read a run along the length have nothing to show for it."""
    if run.config.task.task not in DELAY_TASKS:
        return
    st.info(f"This run is on the {run.config.task.task} task: its context length stays {run.config.task.train_length} "
            "and what changes is the delay. Its accuracy against the delay, seen and unseen, is on the Delays page.")
    st.page_link("pages/delays.py", label="Open the Delays page", icon=":material/timer:")
    stop()


def require_single_head(run: Run) -> None:
    """Stop the page with a pointer to Transformer for runs its core calls do not read (C8 runs), or to
    Delays for a delay task's."""
    if run.config.single_head:
        return
    require_length_task(run)
    st.info("This page reads the single attention head on the retrieval task. This run is a "
            f"{run.config.model.n_layers}-layer model on the {run.config.task.task} task: its per-head "
            "carriers and its accuracy by length are on the Transformer page.")
    st.page_link("pages/transformer.py", label="Open the Transformer page", icon=":material/hub:")
    stop()


def run_summary(run: Run) -> None:
    """What the run is, then its verdict: every page reads the verdict before it shows a claim."""
    task, model, train = run.config.task, run.config.model, run.config.train
    trained = f"{run.steps} steps, train accuracy {run.train_accuracy:.2f}" if run.steps else "not trained"
    if train.init == "constructed":
        trained = f"built by hand to implement the relative rule, {trained}"
    if train.continues:
        trained = f"continues `{train.continues}` for {trained}"
    st.caption(
        f"Run `{run.run_id}` · {model.encoding} encoding, {model.attention} attention · "
        f"{f'{task.task}, delays {task.delays}' if task.task in DELAY_TASKS else f'offset k = {task.offset}'}, "
        f"training length {task.train_length} ({task.length_mode}) · V = {task.vocab_size}, d = {model.d_model} · "
        f"{trained}"
    )
    verdict_banner(run)


def verdict_banner(run: Run) -> bool:
    """The verdict in one box: a warning for a run that did not learn. Returns whether it learned."""
    verdict = run.verdict
    if verdict is None:  # never for a stored run (the store judges old ones when it loads them)
        return True
    limit = getattr(run.model.encoding, "single_head_limit", None) if run.config.model.minimal else None
    text = captions.verdict_text(verdict, run.config.task.train_length, limit)
    if verdict.learned:
        st.success(text, icon=":material/check_circle:")
    else:
        st.warning(text + " The charts below show what this run does; no law or carrier claim is made for it.",
                   icon=":material/warning:")
    return verdict.learned


def document(label: str, read: Callable[[], str], key: str) -> None:
    """A whole document (docs/*.md) in an expander whose text is sent only once it is opened. A collapsed
    expander's content is still sent and laid out by the browser: docs/science.md (69 kB of markdown and
    math) made every Theory visit cost the browser seconds of CPU, docs/rules.md (20 kB) every Dilution and
    Attention visit (bench/README.md, "Where a switch's seconds go"). Opening it reruns the page."""
    with st.expander(label, icon=":material/menu_book:", key=key, on_change="rerun") as shown:
        if shown.open:
            st.markdown(read())


def refusal(what: str, error: Exception) -> None:
    """A request this server refused (over a budget, say), shown where its result would be."""
    st.warning(f"{what}: {plain(str(error))}.", icon=":material/block:")


def head_picker(names: list[str], best: int, run_id: str, key: str, label: str = "Head") -> int:
    """A picker of a run's heads, spelt 'L1H0' in the link (`head=`), starting from `best` for each
    new run unless a link names one; returns the index of the chosen head."""
    if st.session_state.get(f"{key}-run") != run_id:  # another run: start from its best head
        st.session_state.pop(key, None)
        st.session_state[f"{key}-run"] = run_id
    view_option(key, "head", names, names[best])
    chosen = st.selectbox(label, names, key=key, format_func=lambda n: f"layer {n[1:n.index('H')]}, head {n[n.index('H') + 1:]}",
                          help="Layer and head (from 0).")
    show_view("head", chosen)
    return names.index(chosen)


def transformer_preset_buttons() -> None:
    """One button per shipped transformer preset (lengen.presets.transformer_presets), selecting it."""
    presets = transformer_presets()
    for column, (label, run_id) in zip(st.columns(len(presets)), presets.items(), strict=True):
        if column.button(f"Open {label}", key=f"open-{label}", width="stretch",
                         help="Select this shipped 2-layer, 2-head run (shift task, seed 0)."):
            select_run(run_id)
            st.rerun()

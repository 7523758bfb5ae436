"""The Start page: what the picture shows in plain words, the presets that open at once, the claims and where each is
seen, and the picture itself (the three single-head presets' accuracy against length)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lengen.presets import PRESETS, START_LENGTHS, START_SAMPLES, single_head_presets, transformer_presets
from lengen_core.config import ConfigError
from ui import widgets
from ui.address import stop
from ui.captions import accuracy as accuracy_captions
from ui.captions import show
from ui.charts import compare as compare_charts
from ui.runs import evaluation, load_run
from ui.state import select_run, selected_run_id
from ui.theory.sections import SECTION_PARAM

CLAIMS = [
    ("C1", "RoPE extrapolates, learned positions do not (the paper's reason: optimisation, not expressivity).",
     "pages/dilution.py"),
    ("C2", "A minimal fixed-offset retrieval task isolates positional selection.", "pages/train.py"),
    ("C3", "With RoPE the logit depends on the offset alone (Toeplitz logit matrix).", "pages/carrier.py"),
    ("C4", "Learned positions pin the head to a fixed position inside the training range.", "pages/attention.py"),
    ("C5", "The learned RoPE rule is a low-rank carrier kernel aligned with the offset.", "pages/carrier.py"),
    ("C6", "Accuracy decays gracefully with length by an attention-dilution law.", "pages/dilution.py"),
    ("C7", "Linear attention does not extrapolate (try the RoPE + linear preset).", "pages/dilution.py"),
    ("C8", "All of this transfers to a multi-layer, multi-head transformer on a full-sequence task.",
     "pages/transformer.py"),
    ("C9", "The carrier is how gradient descent learns RASP-L's one-line shift_right.", "pages/theory.py"),
    ("C10", ("At a fixed length, a head that finds its source by position learns only the delays it trained on; "
             "a marker carries it to every delay."), "pages/delays.py"),
]
SECTIONS_SHOWN = {"C9": {SECTION_PARAM: "rasp-l"}}  # a link that opens its page at the claim's tab
LENGTHS, SAMPLES = START_LENGTHS, START_SAMPLES  # 16 … 4096, the end of the learned table (lengen.presets)


def what_it_shows() -> None:
    """The picture in the pages' words, and the claim it does not show."""
    st.subheader("What the picture shows")
    st.markdown(
        "In the pages' words: a single attention head learns the **offset k = 3** at a training length of 16. With "
        "**RoPE** the rule it learned depends on the offset alone, so it carries over until the growing number of keys "
        "dilutes the attention; with **learned absolute positions** (APE) the head pins to a position inside the "
        "training range (C4). The paper's account of why gradient descent picks the pinned solution, optimisation "
        "rather than expressivity (C1), is its claim: the charts here show the pinning, not its cause. Pick a preset, "
        "then walk through the pages in the sidebar."
    )


def presets() -> None:
    """A button per shipped preset, in rows by kind; the selected one highlighted."""
    st.subheader("Presets")
    for group, shipped in (("Single head, retrieval task", single_head_presets()),
                           ("Transformer, 2 layers × 2 heads, shift task (C8)", transformer_presets())):
        st.caption(group)
        for column, (label, run_id) in zip(st.columns(3), shipped.items(), strict=False):
            config = PRESETS[label]
            chosen = run_id == selected_run_id()
            column.button(label, key=f"preset-{label}", type="primary" if chosen else "secondary",
                          help=f"Open the shipped {label} run ({config.train.steps} steps max, seed {config.train.seed}).",
                          width="stretch", on_click=select_run, args=(run_id,))  # selected before the rerun draws
    st.caption("The highlighted preset is the selected run; every page shows it at once.")


def claims() -> None:
    """Each claim, a link to the page where it is seen."""
    st.subheader("The claims, and where to see them")
    for claim, text, page in CLAIMS:
        title = page.removeprefix("pages/").removesuffix(".py").title()
        st.page_link(page, label=f"**{claim}** {text} → {title}", help=f"Open the {title} page, where {claim} is seen.",
                     query_params=SECTIONS_SHOWN.get(claim))


def picture(where: DeltaGenerator) -> None:
    """The three single-head presets' accuracy against length, drawn in `where` (its spinner shows where the picture
    will be)."""
    with where:
        try:
            reports = {label: evaluation(run_id, LENGTHS, SAMPLES) for label, run_id in single_head_presets().items()}
        except ConfigError as error:  # a server whose budgets are set below even this
            widgets.refusal("The picture is not drawn on this server", error)
            stop()
        curves = pd.concat([
            pd.DataFrame({"run_id": single_head_presets()[label], "run": label, "length": LENGTHS,
                          "samples": [r.samples for r in rows], "accuracy": [r.accuracy for r in rows],
                          "accuracy_low": [r.accuracy_low for r in rows],
                          "accuracy_high": [r.accuracy_high for r in rows]})
            for label, rows in reports.items()
        ])
        chance = 1 / PRESETS["RoPE"].task.vocab_size
        look_for = accuracy_captions.curves_caption([
            accuracy_captions.run_curve(label, PRESETS[label], load_run(single_head_presets()[label]).verdict, LENGTHS,
                                        [r.accuracy for r in rows], [r.accuracy_low for r in rows])
            for label, rows in reports.items()
        ], note=f"Bands: 95% Wilson intervals over {SAMPLES} sequences per length.")
        figure = compare_charts.accuracy_overlay(curves, chance)
        show.chart_captioned(figure.update_layout(title="The three presets: accuracy against length", height=380),
                             look_for, curves, "start-accuracy", stem="presets")

"""The Transformer page's closing comparison: the shipped RoPE and learned-position transformers, scored only
at the positions past their training length, at the page's lengths and samples."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lengen.presets import TRANSFORMER_MULTIPLES, transformer_presets
from ui.analyses import length_multiples, sequence_evaluation
from ui.captions import accuracy as accuracy_captions
from ui.captions import show
from ui.charts import compare as compare_charts
from ui.charts import transformer as transformer_charts
from ui.runs import load_run


def section(samples: int, chance: float) -> None:
    """Accuracy past the training length of each transformer preset (the selected run's evaluation is cached:
    only the other preset's is computed)."""
    st.subheader("RoPE against learned positions")
    stories = {label: load_run(run_id) for label, run_id in transformer_presets().items()}
    story = pd.concat([
        transformer_charts.beyond_table(label, sequence_evaluation(run.run_id, length_multiples(
            run.run_id, TRANSFORMER_MULTIPLES), samples), run.config.task.train_length)
        for label, run in stories.items()
    ], ignore_index=True)
    beyond = compare_charts.accuracy_overlay(story, chance).update_layout(title="Accuracy beyond the training length")
    said = accuracy_captions.curves_caption(
        [accuracy_captions.run_curve(label, stories[label].config, stories[label].verdict, rows["length"],
                                     rows["accuracy"], rows["accuracy_low"])
         for label, rows in story.groupby("run", sort=False)],
        multiples=(2, 4, 16), note="Bands: 95% Wilson intervals; positions past the training length only.")
    show.chart_captioned(beyond, said, story, "transformer-story")

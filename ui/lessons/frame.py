"""What every lesson element shares: the step's run with its summary above the element, and the element's chart
drawn with its caption, on the page or, when the class is watching a projector, sized to fit the 1024×768
screen beside the step's text with the caption written there (`Projector`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from streamlit.delta_generator import DeltaGenerator

from lengen.api import Run
from lengen.presets import PRESETS
from ui.lessons.files import Step
from ui.runs import load_run
from ui.widgets import chart, run_summary

# Presenter mode, for a 1024×768 projector: the chart beside the step's text, as tall as what is left of the
# screen's 768 px under the step's bar and title and the run's summary and verdict; its title above it and its
# legend in a row over the plot, margins tight, its caption beside it. An element with more above its chart
# (metrics, a line of numbers) takes less (ui.lessons.elements.PRESENT_HEIGHTS).
PRESENT_HEIGHT = 480


@dataclass(frozen=True)
class Projector:
    """A step on a projector: `notes` is the container beside the chart, where its caption goes; `height` the
    chart's height in px."""

    notes: DeltaGenerator | None  # None: the caption under the chart
    height: int = PRESENT_HEIGHT


def draw(figure: go.Figure, look_for: str, data: pd.DataFrame, name: str, stem: str,
         presenting: Projector | None) -> None:
    """`ui.widgets.chart` with the caption beside the chart and the projector's height when presenting."""
    chart(figure, look_for, data, name, stem, notes=presenting.notes if presenting else None,
          height=presenting.height if presenting else None)


def preset_run(step: Step) -> Run:
    """The step's first preset, its summary and verdict shown above the element."""
    run = load_run(PRESETS[step.presets[0]].run_id())
    run_summary(run)
    return run

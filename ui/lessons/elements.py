"""The elements a lesson step can show, and drawing a step's one: each element a renderer that draws one chart
or control of the lab's pages with the pages' own cached analyses (`ui.runs`, `ui.analyses`), chart builders
(`ui.charts`) and captions computed from the run (`ui.captions`). The renderers live by the page they come from:

    ui.lessons.single_head   Start's accuracy overlay, Attention's map and trace, Carrier's s(Δ)
    ui.lessons.dilution      Dilution's accuracy, 1/p, horizon and rules charts
    ui.lessons.transformer   Transformer's head carriers, head attention, accuracy by position, position probe
    ui.lessons.delays        the Delays page's curves, diversity sweep and transfer form
    ui.lessons.training      the Train form with its live view, and the class's runs
    ui.lessons.frame         what they share: the run's summary, the chart on the page or on a projector

What each needs is declared in `ui.lessons.files.ELEMENTS`; `RENDERERS` has the same keys. A renderer gets the
step and, when the class is watching a projector, a `Projector` (charts sized to fit the screen beside the
step's text, each chart's caption written beside it, under the question); the Train form also whether the
class follows a students' link (`locked`: the settings the lesson fixes cannot change).
"""

from __future__ import annotations

from collections.abc import Callable

from streamlit.delta_generator import DeltaGenerator

from lengen_core.config import ConfigError
from ui.lessons import delays, dilution, single_head, training, transformer
from ui.lessons.files import Step
from ui.lessons.frame import PRESENT_HEIGHT, Projector
from ui.widgets import refusal

# An element with more above its chart than the run's summary (metrics, a line of numbers) is less tall.
PRESENT_HEIGHTS = {"accuracy-overlay": 580, "class-runs": 580, "carrier-chart": 390, "horizon": 310, "inverse-mass-chart": 380}

RENDERERS: dict[str, Callable[..., None]] = {
    "accuracy-overlay": single_head.accuracy_overlay, "heatmap": single_head.attention_heatmap,
    "argmax-trace": single_head.argmax_trace, "carrier-chart": single_head.carrier_chart,
    "dilution-chart": dilution.dilution_chart, "inverse-mass-chart": dilution.inverse_mass_chart,
    "horizon": dilution.horizon, "rules-chart": dilution.rules_chart,
    "head-carriers": transformer.head_carriers, "head-attention": transformer.head_attention_map,
    "accuracy-by-position": transformer.accuracy_by_position, "position-probe": transformer.position_probe,
    "train-form": training.train, "class-runs": training.class_runs_chart,
    "delay-overlay": delays.delay_overlay, "delay-curve": delays.delay_curve,
    "delay-diversity": delays.delay_diversity, "delay-transfer": delays.delay_transfer,
}


def render(step: Step, locked: bool, notes: DeltaGenerator | None = None) -> None:
    """Draw the step's element (for a projector when `notes` is given: the container beside the chart for its
    caption); a request this server refuses (over a budget) is a message in its place."""
    presenting = None if notes is None else Projector(notes, PRESENT_HEIGHTS.get(step.element, PRESENT_HEIGHT))
    try:
        if step.element == "train-form":
            training.train(step, presenting, locked)
        else:
            RENDERERS[step.element](step, presenting)
    except ConfigError as error:
        refusal("Not shown on this server", error)

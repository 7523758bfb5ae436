"""Draws a `Caption` (ui.captions.common): its lead where a person reads it, the rest one click away. The one
module of ui.captions that imports Streamlit; the builders beside it stay pure."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import widgets
from ui.captions.common import Caption

MORE = widgets.MORE_LABEL


def more(caption: Caption | str, label: str = MORE, where: DeltaGenerator | None = None) -> None:
    """The rest of `caption` in a closed expander (nothing when it has no rest)."""
    rest = getattr(caption, "more", "")
    if rest:
        (where or st).expander(label).caption(rest)


def caption(text: Caption | str, label: str = "More on this", where: DeltaGenerator | None = None) -> None:
    """A caption with no chart: its lead, then the rest in an expander."""
    (where or st).caption(getattr(text, "lead", text))
    more(text, label, where)


def chart_captioned(figure: go.Figure, look_for: Caption | str, data: pd.DataFrame, name: str,
                    stem: str | None = None) -> None:
    """ui.widgets.chart with the caption's lead as its "what to look for", the rest in an expander under it."""
    widgets.chart(figure, look_for, data, name, stem)

"""A chart's PNG export (the camera in its toolbar): drawn at a paper's size, whatever the size on screen, with
its legend inside the image. Plotly draws the image again at the size asked for; the legend rows and the
margins that hold them are laid out afresh at that width."""

from __future__ import annotations

import plotly.graph_objects as go

EXPORT_WIDTH = 1200  # px: a legend of six entries fits in two rows
EXPORT_SCALE = 2  # pixels per px: 2400 px wide, sharp in a two-column paper
LEGEND_ROOM = 60  # px below the plot for each row of legend beyond the first


def export_config(figure: go.Figure, name: str) -> dict:
    """plotly.js config for `st.plotly_chart`: the camera saves `{name}.png` at EXPORT_WIDTH, as tall as the
    figure (its own height, 450 px when it has none), at EXPORT_SCALE."""
    height = figure.layout.height or 450
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": name, "width": EXPORT_WIDTH, "height": height,
                                     "scale": EXPORT_SCALE}}

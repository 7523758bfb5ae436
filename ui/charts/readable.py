"""Chart text readable on a projector: every text a figure draws (ticks, axis titles, legend, annotations,
colour bars, text marks, hover) at least MIN_FONT px, in a colour with a contrast of at least MIN_CONTRAST
against the page (WCAG 2.x: (L1 + 0.05) / (L2 + 0.05) of the relative luminances; 4.5:1 is the minimum for
normal text). Streamlit's plotly theme draws ticks and axis titles 12-13 px in #808495, 3.7:1 on white: a
figure's own fonts override its template, so `readable` sets each one explicitly.

A colour that carries meaning (the chance label's grey, a predicted "≥" in orange) keeps its hue and is only
darkened, towards black, until it passes.
"""

from __future__ import annotations

import re

import plotly.graph_objects as go

MIN_FONT = 14  # px
MIN_CONTRAST = 4.5
BACKGROUND = "#ffffff"  # the page behind every chart: the light theme (.streamlit/config.toml, base = "light")
INK = "#31333f"  # Streamlit's own text colour: 12.6:1 on white
TITLE_FONT = 17  # a chart's title, above its 14 px text
# A font every system has: a PNG export is drawn as an image, without the page's web fonts, so text laid out in
# the page's Source Sans would be drawn wider in the export and a legend's entries would run into each other.
FAMILY = "Arial, 'Liberation Sans', Helvetica, sans-serif"
NAMED = {"white": "#ffffff", "black": "#000000", "red": "#ff0000", "green": "#008000", "blue": "#0000ff",
         "grey": "#808080", "gray": "#808080", "orange": "#ffa500"}
AXIS = re.compile(r"[xy]axis\d*")


def rgb(colour: str, background: str = BACKGROUND) -> tuple[float, float, float]:
    """'#1f77b4', '#fff', 'rgb(1, 2, 3)', 'rgba(1, 2, 3, 0.5)' (blended over `background`) or a name in
    NAMED, as red, green, blue in 0…255."""
    text = NAMED.get(colour.strip().lower(), colour.strip().lower())
    if text.startswith("#") and len(text) in (4, 7):
        digits = text[1:] if len(text) == 7 else "".join(c * 2 for c in text[1:])
        return tuple(float(int(digits[i:i + 2], 16)) for i in (0, 2, 4))
    found = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    if found is None:
        raise ValueError(f"not a colour this check reads: {colour!r}")
    parts = [float(p) for p in found.group(1).split(",")]
    alpha = parts[3] if len(parts) == 4 else 1.0
    under = rgb(background) if alpha < 1 else (0.0, 0.0, 0.0)
    return tuple(alpha * c + (1 - alpha) * u for c, u in zip(parts[:3], under, strict=True))


def luminance(colour: str) -> float:
    """WCAG relative luminance: each sRGB channel linearised, weighted 0.2126, 0.7152, 0.0722."""
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    red, green, blue = (linear(c) for c in rgb(colour))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(colour: str, background: str = BACKGROUND) -> float:
    """WCAG contrast ratio, 1 (none) to 21 (black on white)."""
    lighter, darker = sorted((luminance(colour), luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def legible(colour: str | None, background: str = BACKGROUND) -> str:
    """`colour` (INK when None), darkened towards black in steps of 5% until it reaches MIN_CONTRAST."""
    if colour is None:
        return INK
    red, green, blue = rgb(colour, background)
    shade = 1.0
    while contrast(_hex(red * shade, green * shade, blue * shade), background) < MIN_CONTRAST:
        shade -= 0.05
    return _hex(red * shade, green * shade, blue * shade)


def _hex(red: float, green: float, blue: float) -> str:
    return "#" + "".join(f"{round(max(0.0, c)):02x}" for c in (red, green, blue))


def _font(font, least: int = MIN_FONT) -> dict:
    """A font at least `least` px, in a legible version of its colour."""
    return dict(size=max(least, font.size or 0), color=legible(font.color))


def readable(figure: go.Figure) -> go.Figure:
    """Every text of `figure` at least MIN_FONT px and MIN_CONTRAST against the page, set explicitly (a
    template's, Streamlit's included, no longer applies to it). Idempotent; returns the figure."""
    layout = figure.layout
    figure.update_layout(font=dict(**_font(layout.font), family=FAMILY), legend_font=_font(layout.legend.font),
                         legend_title_font=_font(layout.legend.title.font),
                         title_font=_font(layout.title.font, TITLE_FONT), hoverlabel_font_size=max(
                             MIN_FONT, layout.hoverlabel.font.size or 0))
    for name in [name for name in layout if AXIS.fullmatch(name)]:
        axis = layout[name]
        axis.update(tickfont=_font(axis.tickfont), title_font=_font(axis.title.font))
    for note in layout.annotations:
        note.update(font=_font(note.font))
    for trace in figure.data:
        if "textfont" in trace and (trace.text is not None or trace.texttemplate is not None):
            trace.update(textfont=_font(trace.textfont))
        bar = trace.colorbar if "colorbar" in trace else trace.marker.colorbar if "marker" in trace else None
        if bar is not None and (trace.type in ("heatmap", "contour", "histogram2d") or trace.marker.showscale):
            bar.update(tickfont=_font(bar.tickfont), title_font=_font(bar.title.font))
    return figure


def readable_altair(chart):
    """An altair chart's axes, legends and facet headers at MIN_FONT px in INK (a chart's own config wins over
    Streamlit's theme, whose axis labels are the same grey as plotly's). Returns the configured chart."""
    text = dict(labelFontSize=MIN_FONT, titleFontSize=MIN_FONT, labelColor=INK, titleColor=INK)
    return (chart.configure_axis(**text).configure_legend(**text).configure_header(**text)
            .configure_title(fontSize=TITLE_FONT, color=INK))

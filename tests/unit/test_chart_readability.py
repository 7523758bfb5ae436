"""Every chart builder, on made-up data, draws what a projector can show: heatmap axes end at the data,
log axes are labelled at powers of ten as 10ⁿ, accuracy carries its Wilson band, hovers give rounded
numbers and the sample count, and m_out says what it was fitted to. The pages' own figures and CSVs
are checked the same way in tests/app/test_chart_data.py."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from lengen_core.analysis.evaluate import wilson_interval
from lengen_core.analysis.fit import DilutionFit, FitResult
from lengen_core.analysis.sequence import SequenceReport
from ui.captions import accuracy as accuracy_captions
from ui.charts import common as charts
from ui.charts import compare as compare_charts
from ui.charts import export, readable
from ui.charts import transformer as transformer_charts
from ui.theory import charts as theory_charts
from ui.widgets import csv_name

LENGTHS = np.array([16, 32, 64, 128, 256, 512, 1024])
SAMPLES = 256
UNFORMATTED = re.compile(r"%\{(?!fullData\.)[^}:]+\}")  # a placeholder without a format: "%{y}" prints 0.9101563


def accuracy_table() -> pd.DataFrame:
    accuracy = np.array([1.0, 0.99, 0.95, 0.8, 0.5, 0.2, 0.07])
    low, high = zip(*(wilson_interval(round(a * SAMPLES), SAMPLES) for a in accuracy), strict=True)
    mass = np.array([0.9, 0.85, 0.7, 0.5, 0.3, 0.15, 0.08])
    return pd.DataFrame({"length": LENGTHS, "samples": SAMPLES, "accuracy": accuracy, "accuracy_low": low,
                         "accuracy_high": high, "target_mass": mass, "target_mass_sem": mass * 0.02,
                         "predicted_accuracy": accuracy - 0.01, "predicted_mass": mass + 0.01,
                         "vote_accuracy": np.minimum(1, accuracy + 0.1)})


def sequence_report(length: int, samples: int = 64, train_length: int = 16) -> SequenceReport:
    positions = np.arange(3, length, max(1, length // 64))
    by_position = np.clip(1.2 - positions / length, 0, 1)
    low, high = wilson_interval(round(0.9 * samples * (length - 3)), samples * (length - 3))
    return SequenceReport(length=length, samples=samples, accuracy=0.9, accuracy_low=low, accuracy_high=high,
                          accuracy_beyond=None if length <= train_length else 0.8, positions=positions,
                          accuracy_by_position=by_position, target_mass=0.7, argmax_key=length - 4,
                          carrier_layer=1, carrier_head=0, seconds=0.1)


def fit_table() -> pd.DataFrame:
    return pd.DataFrame({"length": LENGTHS, "fitted_mass": [0.88, 0.84, 0.7, 0.52, 0.31, 0.15, 0.08]})


def overlay_table() -> pd.DataFrame:
    one, two = accuracy_table(), accuracy_table()
    return pd.concat([one.assign(run="RoPE"), two.assign(run="APE", accuracy=two["accuracy"] / 2)], ignore_index=True)


def every_figure() -> dict[str, go.Figure]:
    """One figure from every builder of every chart module, on made-up data."""
    table, reports = accuracy_table(), [sequence_report(n) for n in (16, 32, 64, 128)]
    rng = np.random.default_rng(0)
    offsets = np.arange(64)
    heads = pd.DataFrame([{"layer": layer, "head": head, "offset": d, "s": float(np.cos(d / 3)), "is_carrier": head == 0,
                           "pinned_key": None} for layer in range(2) for head in range(2) for d in range(32)])
    equivariance = pd.DataFrame({"shift": [0, 1, 10, 100, 1000], "max_abs_difference": [0.0, 1e-7, 2e-7, 1e-6, 3e-6],
                                 "logit_scale": 13.0})
    carriers = pd.DataFrame({"run": "RoPE", "offset": offsets, "shown": np.cos(offsets / 3)})
    return {
        "training": charts.training_curve(pd.DataFrame({"step": [0, 10, 20], "loss": [2.7, 1.0, 0.1],
                                                        "accuracy": [0.1, 0.6, 1.0]}), 20),
        "heatmap": charts.attention_map(rng.random((64, 64)), 1, 64, 16),
        "heatmap-pooled": charts.attention_map(rng.random((256, 256)), 4, 1024, 16, "Layer 0, head 0"),
        "zoom": charts.zoom_map(rng.random((32, 64)), 992, 960, 1020),
        "argmax": charts.argmax_trace(np.maximum(np.arange(64) - 3, 0), 16, 3),
        "carrier": charts.carrier_curve(offsets, np.cos(offsets / 3), 16, 3),
        "recurrences": charts.recurrences([300, 2_000, 40_000], [0.5, -1.0, 0.2], 16),
        "spectrum": charts.spectrum(np.geomspace(1e-4, 1, 32), rng.random(32), analytic=True),
        "singular-values": charts.singular_values(np.geomspace(100, 1e-6, 24), 8),
        "dilution": charts.dilution(table, fit_table(), 1 / 16),
        "inverse-mass": charts.inverse_mass(table, fit_table()),
        "accuracy-overlay": compare_charts.accuracy_overlay(overlay_table(), 1 / 16),
        "mass-overlay": compare_charts.mass_overlay(overlay_table()),
        "carrier-overlay": compare_charts.carrier_overlay(carriers, [16], [3], "Carriers", "s"),
        "head-grid": transformer_charts.head_grid(heads, 2, 2, 3),
        "head-attention": transformer_charts.head_attention(rng.random((64, 64)), 64, 16, "L1 H0 at L = 64"),
        "by-position": transformer_charts.accuracy_by_position(transformer_charts.position_table(reports), 16, 1 / 16),
        "by-length": transformer_charts.accuracy_by_length(transformer_charts.length_table(reports, 16), 1 / 16),
        "beyond": compare_charts.accuracy_overlay(transformer_charts.beyond_table("RoPE", reports, 16), 1 / 16),
        "equivariance": theory_charts.equivariance(equivariance, 1e-3),
    }


FIGURES = every_figure()


def axes(figure: go.Figure) -> dict[str, object]:
    layout = figure.layout
    return {name: layout[name] for name in layout if re.fullmatch(r"[xy]axis\d*", name)}


def log_axes(figure: go.Figure) -> dict[str, object]:
    return {name: axis for name, axis in axes(figure).items() if axis.type == "log"}


# --- heatmaps: the axes end where the positions do ---------------------------------------------------


@pytest.mark.parametrize("cells, pool, length", [(64, 1, 64), (256, 4, 1024), (256, 64, 16_384)])
def test_heatmap_axes_stay_within_the_positions(cells: int, pool: int, length: int) -> None:
    figure = charts.attention_map(np.random.default_rng(1).random((cells, cells)), pool, length, 16)
    heatmap = figure.data[0]
    first_edge = heatmap.x0 - heatmap.dx / 2
    last_edge = heatmap.x0 + heatmap.dx * (cells - 1) + heatmap.dx / 2
    assert (first_edge, last_edge) == (-0.5, length - 0.5)  # the cells cover exactly the positions 0 … L − 1
    assert tuple(figure.layout.xaxis.range) == (-0.5, length - 0.5)
    assert tuple(figure.layout.yaxis.range) == (length - 0.5, -0.5)  # query 0 at the top, none below 0 or past L
    for shape in figure.layout.shapes:  # the training-length lines stay inside too
        assert -0.5 <= min(shape.x0, shape.x1) and max(shape.x0, shape.x1) <= length - 0.5
        assert -0.5 <= min(shape.y0, shape.y1) and max(shape.y0, shape.y1) <= length - 0.5
    assert figure.layout.yaxis.scaleanchor == "x" and figure.layout.xaxis.constrain == "domain"


def test_zoom_and_head_maps_stay_within_their_positions() -> None:
    zoom = FIGURES["zoom"]
    assert tuple(zoom.layout.xaxis.range) == (959.5, 1023.5) and tuple(zoom.layout.yaxis.range) == (1023.5, 991.5)
    head = FIGURES["head-attention"]
    assert tuple(head.layout.xaxis.range) == (-0.5, 63.5) and tuple(head.layout.yaxis.range) == (63.5, -0.5)


def test_the_zoom_circles_the_target_only_when_it_is_in_view() -> None:
    inside = charts.zoom_map(np.ones((32, 64)), 992, 960, 1020)
    outside = charts.zoom_map(np.ones((32, 64)), 992, 960, 100)
    assert [t.name for t in inside.data if t.type == "scatter"] == ["target key t − k"]
    assert not [t for t in outside.data if t.type == "scatter"]


def test_a_multi_layer_map_names_its_layer_and_head() -> None:
    assert FIGURES["heatmap-pooled"].layout.title.text.startswith("Layer 0, head 0 · L = 1024")
    assert FIGURES["heatmap"].layout.title.text == "L = 64"
    assert charts.zoom_map(np.ones((2, 2)), 0, 0, 0, "Layer 0, head 0").layout.title.text.startswith("Layer 0, head 0")
    assert charts.argmax_trace(np.arange(8), 4, 1, "Layer 0, head 0").layout.title.text.startswith("Layer 0, head 0")


# --- log axes: powers of ten, as 10ⁿ ------------------------------------------------------------------


def test_the_builders_draw_log_axes() -> None:  # so the next test is not about nothing
    with_log = {name for name, figure in FIGURES.items() if log_axes(figure)}
    assert {"dilution", "inverse-mass", "spectrum", "singular-values", "recurrences", "accuracy-overlay",
            "mass-overlay", "by-length", "beyond", "equivariance"} <= with_log


@pytest.mark.parametrize("name", FIGURES)
def test_every_log_axis_is_labelled_at_powers_of_ten(name: str) -> None:
    for axis_name, axis in log_axes(FIGURES[name]).items():
        assert axis.dtick == 1, (name, axis_name)
        assert axis.exponentformat == "power" and axis.showexponent == "all", (name, axis_name)
        assert axis.tickvals is None, (name, axis_name)  # no hand-placed labels between the powers


@pytest.mark.parametrize("name", FIGURES)
def test_no_axis_uses_si_prefixes(name: str) -> None:  # "100μ" on the spectrum
    for axis_name, axis in axes(FIGURES[name]).items():
        assert axis.exponentformat == "power", (name, axis_name)


@pytest.mark.parametrize("values", [[1.05, 2.5], [16, 64], [32, 256], [100, 900], [1.1, 12.5], [3e-5, 2e-4]])
def test_a_short_log_axis_reaches_two_powers_of_ten(values: list[float]) -> None:
    low, high = charts.decades(values)
    assert low <= np.log10(min(values)) and np.log10(max(values)) <= high  # the data stay in view
    assert len(range(int(np.ceil(low)), int(np.floor(high)) + 1)) == 2  # two labels, no more


def test_a_log_axis_reaches_the_nearer_power_and_leaves_a_long_one_alone() -> None:
    assert 0.9 < charts.decades([32, 256])[0] and charts.decades([32, 256])[1] < 2.5  # out to 10, not to 1,000
    assert 1.9 < charts.decades([100, 900])[0]  # out to 1,000, not to 10
    assert charts.decades([16, 4096]) is None  # 100 and 1,000 inside already
    assert tuple(FIGURES["inverse-mass"].layout.yaxis.range) == tuple(charts.decades(1 / accuracy_table()["target_mass"]))


# --- uncertainty: Wilson bands, samples in the hover ---------------------------------------------------


def bands(figure: go.Figure) -> list[tuple[list[float], list[float]]]:
    """(upper, lower) y of each filled band: a trace filled to the one before it."""
    found = []
    for before, trace in zip(figure.data, figure.data[1:], strict=False):
        if trace.fill == "tonexty":
            found.append((list(before.y), list(trace.y)))
    return found


@pytest.mark.parametrize("name, expected", [("dilution", 1), ("accuracy-overlay", 2), ("beyond", 1),
                                            ("by-position", 4), ("by-length", 2)])
def test_accuracy_is_drawn_with_its_wilson_band(name: str, expected: int) -> None:
    found = bands(FIGURES[name])
    assert len(found) == expected
    for upper, lower in found:
        assert all(low <= high for low, high in zip(lower, upper, strict=True))


def test_the_dilution_band_is_the_wilson_interval_of_each_length() -> None:
    table = accuracy_table()
    [(upper, lower)] = bands(FIGURES["dilution"])
    assert upper == list(table["accuracy_high"]) and lower == list(table["accuracy_low"])


def test_the_dilution_chart_draws_the_ideal_vote_readout_beside_the_model_where_it_was_measured() -> None:
    table = accuracy_table()
    [vote] = [t for t in FIGURES["dilution"].data if t.name == "ideal vote readout"]
    assert list(vote.y) == list(table["vote_accuracy"]) and list(vote.x) == list(table["length"])
    for older in (table.drop(columns="vote_accuracy"), table.assign(vote_accuracy=np.nan)):  # stored before it
        assert "ideal vote readout" not in [t.name for t in charts.dilution(older, None, 1 / 16).data]


def test_the_band_by_position_counts_samples_times_the_positions_in_each_bin() -> None:
    report = sequence_report(256)
    table = transformer_charts.position_table([report])
    widths = np.diff(np.append(report.positions, 256))
    i = 5
    assert (table["accuracy_low"][i], table["accuracy_high"][i]) == wilson_interval(
        round(report.accuracy_by_position[i] * 64 * widths[i]), 64 * widths[i])
    assert (table["samples"] == 64).all()


@pytest.mark.parametrize("name", FIGURES)
def test_every_hover_has_formatted_numbers(name: str) -> None:
    for trace in FIGURES[name].data:
        if trace.hoverinfo == "skip":
            continue
        assert trace.hovertemplate, (name, trace.name)
        assert not UNFORMATTED.findall(trace.hovertemplate), (name, trace.name, trace.hovertemplate)


@pytest.mark.parametrize("name", ["dilution", "accuracy-overlay", "mass-overlay", "by-position", "by-length", "beyond",
                                  "inverse-mass"])
def test_measured_points_give_their_sample_count_in_the_hover(name: str) -> None:
    counted = [t for t in FIGURES[name].data if t.hovertemplate and "n = %{customdata" in t.hovertemplate]
    assert counted
    for trace in counted:  # the column it points at holds the sample count
        index = int(re.search(r"n = %\{customdata\[(\d)\]", trace.hovertemplate).group(1))
        assert {row[index] for row in trace.customdata} <= {SAMPLES, 64}


def test_the_hover_of_accuracy_reads_like_the_caption() -> None:
    trace = next(t for t in FIGURES["dilution"].data if t.name == "accuracy measured")
    assert trace.hovertemplate == ("L = %{x:,}<br>accuracy %{y:.3f} (95%: %{customdata[0]:.3f}–%{customdata[1]:.3f})"
                                   "<br>n = %{customdata[2]:,} sequences<extra>%{fullData.name}</extra>")


# --- tables and CSVs ------------------------------------------------------------------------------------


def test_transformer_tables_carry_the_sample_count() -> None:
    reports = [sequence_report(n) for n in (16, 32, 64)]
    for table in (transformer_charts.position_table(reports), transformer_charts.length_table(reports, 16),
                  transformer_charts.beyond_table("RoPE", reports, 16)):
        assert (table["samples"] == 64).all()
    lengths = transformer_charts.length_table(reports, 16)
    assert lengths["accuracy_beyond_low"].isna().tolist() == [True, False, False]  # nothing past training at 16


def test_csv_files_are_named_after_their_run_and_chart() -> None:
    assert csv_name("dilution", "rope-softmax-retrieval-s0-ce9f6b") == "rope-softmax-retrieval-s0-ce9f6b-dilution.csv"
    assert csv_name("compare-accuracy") == "compare-accuracy.csv"


# --- m_out says what it was fitted to -------------------------------------------------------------------


def test_m_out_names_the_lengths_and_samples_it_came_from() -> None:
    law = DilutionFit(16, 1.1, 5.19, 5.17, 5.23, 0.05, 7, 1024, 512)
    fitted = FitResult("fitted", law, "")
    assert accuracy_captions.m_out_text(fitted) == "5.19 (5.17–5.23)"  # without samples, as before
    assert accuracy_captions.m_out_text(fitted, 256) == "5.19 (5.17–5.23), fitted 16–1,024 (7 lengths), 256 samples"
    missed = FitResult("fitted", DilutionFit(16, 1.1, 5.19, 5.17, 5.23, 0.14, 7, 1024, 512), "")
    assert accuracy_captions.m_out_text(missed, 1024) == ("5.19 (5.17–5.23), fitted 16–1,024 (7 lengths), 1,024 "
                                                          "samples; law off by 14%")
    assert accuracy_captions.m_out_text(FitResult("at_chance", None, ""), 256) == "at chance"


# --- text readable on a projector: ≥ 14 px, contrast ≥ 4.5:1 (WCAG) against the page -------------------


def texts(figure: go.Figure) -> list[tuple[str, dict]]:
    """(where, font) of every text the figure draws, as plotly resolves it: each font the figure sets, over
    the figure's own layout font; the fonts a template would otherwise give (ticks, axis titles, legend,
    annotations, colour bars) must be set by the figure itself, so a theme's grey cannot apply."""
    plain = figure.to_plotly_json()
    layout = plain["layout"]
    base = layout.get("font", {})
    found = [("layout.font", base)]

    def walk(node, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "template":  # plotly's default, which Streamlit's theme replaces: see `required`
                    continue
                if key.endswith("font") and isinstance(value, dict) and "hoverlabel" not in where:
                    found.append((f"{where}.{key}", {**base, **value}))
                else:
                    walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(layout, "layout")
    walk(plain["data"], "data")
    required = [f"layout.{name}.tickfont" for name in layout if re.fullmatch(r"[xy]axis\d*", name)]
    required += [f"layout.{name}.title.font" for name in layout if re.fullmatch(r"[xy]axis\d*", name)]
    required += [f"layout.annotations[{i}].font" for i in range(len(layout.get("annotations", [])))]
    required += ["layout.legend.font"]
    present = {where for where, _ in found}
    found += [(f"{where} (not set: the theme's)", {}) for where in required if where not in present]
    return found


def unreadable(figure: go.Figure) -> list[str]:
    """The texts under MIN_FONT px, or under MIN_CONTRAST against the page, or left to the theme."""
    problems = [f"hover {figure.layout.hoverlabel.font.size} px" for _ in [0]
                if (figure.layout.hoverlabel.font.size or 0) < readable.MIN_FONT]
    for where, font in texts(figure):
        size, colour = font.get("size"), font.get("color")
        if size is None or colour is None or size < readable.MIN_FONT or \
                readable.contrast(colour, readable.BACKGROUND) < readable.MIN_CONTRAST:
            problems.append(f"{where}: {size} px, {colour}")
    return problems


def drawn(figure: go.Figure, height: int | None = None) -> go.Figure:
    """The figure as `ui.widgets.present_chart` hands it to Streamlit (sized for a projector with `height`)."""
    import ui.widgets as widgets

    sent = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(widgets.st, "plotly_chart", lambda figure, **options: sent.append((figure, options)))
        patch.setattr(widgets.st, "markdown", lambda *args, **options: None)
        widgets.present_chart(go.Figure(figure), height, "chart-test")
    [(shown, options)] = sent
    assert options["config"]["toImageButtonOptions"]["filename"] == "chart-test"
    return shown


def test_the_wcag_contrast_is_the_standards_figures() -> None:
    assert readable.contrast("#000000") == pytest.approx(21.0)
    assert readable.contrast("#ffffff") == pytest.approx(1.0)
    assert readable.contrast("#767676") == pytest.approx(4.54, abs=0.01)  # the lightest grey that passes on white
    assert readable.contrast("#808495") == pytest.approx(3.7, abs=0.05)  # Streamlit's tick grey: fails (issue 40)
    assert readable.contrast("rgba(0, 0, 0, 0.5)") == pytest.approx(readable.contrast("#808080"), abs=0.05)  # 127.5 against 128


def test_the_check_finds_small_light_or_theme_text() -> None:  # so the tests below are not about nothing
    figure = charts.dilution(accuracy_table(), fit_table(), 1 / 16)
    assert unreadable(figure)  # as built: the ticks are left to the theme
    small = readable.readable(go.Figure(figure))
    assert not unreadable(small)
    small.update_xaxes(tickfont_size=13)
    assert any("xaxis.tickfont: 13" in problem for problem in unreadable(small))
    light = readable.readable(go.Figure(figure)).update_layout(legend_font_color="#999999")
    assert any("legend.font" in problem for problem in unreadable(light))
    noted = readable.readable(go.Figure(figure)).add_annotation(text="late note", font_color="#aaaaaa", x=0, y=0)
    assert any("annotations" in problem for problem in unreadable(noted))


@pytest.mark.parametrize("name", FIGURES)
@pytest.mark.parametrize("height", [None, 300])
def test_every_chart_is_drawn_with_readable_text(name: str, height: int | None) -> None:
    assert not unreadable(drawn(FIGURES[name], height)), name


def test_a_legible_colour_keeps_its_hue_and_passes() -> None:
    for colour in (charts.REFERENCE, charts.PREDICTED, "#2ca02c", "rgb(128, 132, 149)", readable.INK):
        darker = readable.legible(colour)
        assert readable.contrast(darker) >= readable.MIN_CONTRAST
        red, green, blue = readable.rgb(colour)
        shade = readable.rgb(darker)
        assert all(abs(c * (shade[0] / red) - s) <= 1.5 for c, s in zip((red, green, blue), shade, strict=True))


def test_the_png_export_is_drawn_at_a_papers_size() -> None:
    options = export.export_config(FIGURES["dilution"], "chart-dilution")["toImageButtonOptions"]
    assert options["format"] == "png" and options["width"] >= 1000 and options["scale"] >= 2
    assert options["height"] == FIGURES["dilution"].layout.height


@pytest.mark.parametrize("height", [320, 380, 460])
def test_the_legend_sits_a_fixed_gap_under_the_plot(height: int) -> None:
    figure = charts.recurrences([300, 2_000], [0.5, -1.0], 16).update_layout(height=height)
    figure = charts._layout(figure, "t", "x", "y", height=height)
    plot = height - figure.layout.margin.t - figure.layout.margin.b
    assert -figure.layout.legend.y * plot == pytest.approx(charts.LEGEND_GAP)


def test_an_altair_chart_is_drawn_with_readable_text() -> None:  # the Sweeps page's (ui.sweep_view)
    import altair as alt

    plain = alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_point().encode(x="x:Q", y="y:Q")
    config = readable.readable_altair(plain).to_dict()["config"]
    for part in ("axis", "legend", "header"):
        assert config[part]["labelFontSize"] >= readable.MIN_FONT and config[part]["titleFontSize"] >= readable.MIN_FONT
        for colour in (config[part]["labelColor"], config[part]["titleColor"]):
            assert readable.contrast(colour) >= readable.MIN_CONTRAST, (part, colour)

"""The Theory page's optimisation experiment (C1) through AppTest: three charts with data, captions that
carry the numbers of the computation they describe, the default experiment shipped with the presets (a
first visit trains and evaluates nothing), and a refusal in place over the server's budget when it has
to compute."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from lengen.budget import MEMORY_ENV
from lengen.presets import OPTIMISATION_TRACES, START_LENGTHS, START_SAMPLES, shipped_trace
from ui.theory import gradients as optimisation

APP = str(Path(__file__).resolve().parents[2] / "app.py")
LOOK_FOR = "**What to look for:** "


def theory() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=600).run()
    app.switch_page("pages/theory.py")
    app.session_state["theory-section"] = "Learned positions (C1)"  # its tab
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def caption(app: AppTest, start: str) -> str:
    (text,) = [c.value[len(LOOK_FOR):] for c in app.caption if c.value.startswith(LOOK_FOR + start)]
    return text


def figure(app: AppTest, name: str) -> go.Figure:
    """The chart drawn under `chart-{name}` (ui.widgets.chart)."""
    (chart,) = [c for c in app.get("plotly_chart") if c.proto.id.endswith(f"chart-{name}")]
    return pio.from_json(chart.proto.spec)


def values(array) -> np.ndarray:
    """A trace's array as plotted: plotly sends numpy arrays as base64 ({dtype, bdata, shape})."""
    if isinstance(array, dict):
        flat = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = array.get("shape")
        return flat.reshape([int(n) for n in shape.split(",")] if isinstance(shape, str) else shape or -1)
    return np.asarray(array, dtype=float)


@pytest.fixture(scope="module")
def page() -> AppTest:
    return theory()


def test_the_construction_reaches_the_end_of_its_table_and_the_trained_run_does_not(page: AppTest) -> None:
    text = caption(page, "Built by hand")
    assert "answers 1.00 at 4× the training length (L = 64) and 1.00 at L = 4,096 (256×" in text
    assert "can express the relative rule" in text and "does NOT" not in text
    trained = float(re.search(r"the same config answers (\d\.\d\d) at 4×", text).group(1))
    assert trained < 0.15  # the Learned (APE) preset: chance is 0.0625
    lines = [t for t in figure(page, "constructed-reach").data if t.mode == "markers+lines"]
    assert [t.name for t in lines] == ["constructed head", "random start"]
    assert all(list(values(t.x)) == [16 << p for p in range(9)] for t in lines)
    assert list(values(lines[0].y)) == [1.0] * 9 and max(values(lines[1].y)[2:]) < 0.15  # from 4× on


def test_the_gradient_map_shows_zero_past_the_training_length(page: AppTest) -> None:
    text = caption(page, "Over all")
    assert re.search(r"rows 16–4,095 got at most 0\b", text) and "never read in training" in text
    (heatmap,) = figure(page, "row-gradients").data
    rows = values(heatmap.z).astype(float)  # rows × steps, log10 norm; an exact zero is NaN (blank)
    assert rows.shape[0] == optimisation.SHOWN_ROWS
    assert np.isnan(rows[16:]).all()
    assert np.isfinite(rows[15]).all()  # the query's own row is read at every step


def test_the_drift_caption_carries_the_numbers_of_the_training_it_draws(page: AppTest) -> None:
    # The trace the page drew: the one shipped with the presets. A fresh training on this CPU is another
    # trajectory past its first steps (tests/unit/test_precomputed.py), so its numbers are not the page's.
    shipped = shipped_trace(optimisation.TRAINED_ON, optimisation.DRIFT_EVERY, (16, 64), optimisation.TRACE_SAMPLES)
    trace = optimisation._traced(optimisation.TRAINED_ON, optimisation.DRIFT_EVERY)  # as drift() reads it
    assert shipped is not None and trace.losses == shipped.losses
    far = trace.accuracy(64)
    assert far[0] == 1.0 and far[-1] < 0.2  # the drift itself: the built head's reach is trained away
    text = caption(page, "Started from the built head")
    assert f"Accuracy at L = 64 went from {far[0]:.2f} to {far[-1]:.2f}" in text
    assert f"{optimisation.DRIFT_STEPS:,} steps lowered the loss to {trace.losses[-1]:.2g}" in text
    lines = {t.name: t for t in figure(page, "constructed-drift").data if t.mode == "markers+lines"}
    assert list(values(lines["constructed head"].y)) == pytest.approx(list(far))
    assert max(values(lines["random start"].y)) < 0.2


def test_the_default_experiment_ships_with_the_presets() -> None:
    for config, every in OPTIMISATION_TRACES:
        trace = shipped_trace(config, every, optimisation.TRACE_LENGTHS, optimisation.TRACE_SAMPLES)
        assert trace is not None and trace.config == config, config.run_id()
        assert trace.gradient_steps[0] == 1 and trace.gradient_steps[-1] == len(trace.losses)
        assert trace.row_gradient_norms.shape == (len(trace.gradient_steps), optimisation.SHOWN_ROWS)
        assert trace.largest_row_gradient.shape == (config.model.max_positions,)
    for run_id in (optimisation.CONSTRUCTED.run_id(), optimisation.RANDOM_START.run_id()):
        reports = optimisation._shipped_reports(run_id, START_LENGTHS, START_SAMPLES)
        assert reports is not None and [r.length for r in reports] == list(START_LENGTHS), run_id
    assert optimisation.TRAINED_ON.train.steps == optimisation.DRIFT_STEPS
    assert shipped_trace(optimisation.RANDOM_START, 7, optimisation.TRACE_LENGTHS, optimisation.TRACE_SAMPLES) is None
    assert shipped_trace(optimisation.RANDOM_START, optimisation.GRADIENT_EVERY, (16,), optimisation.TRACE_SAMPLES) is None


def test_a_first_visit_trains_and_evaluates_nothing_even_over_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    def computed(*args, **kwargs):
        raise AssertionError("the optimisation section computed what ships with the presets")

    for name in ("trace_training", "evaluate", "initial_model"):
        monkeypatch.setattr(optimisation, name, computed)
    monkeypatch.setenv(MEMORY_ENV, "1")  # nothing fits in 1 MB: only what is shipped can be shown
    for cached in (optimisation._trace, optimisation._constructed_reports):
        cached.clear()
    app = theory()
    refused = [w.value for w in app.warning if w.value.startswith(("No gradient trace", "No training from", "No comparison"))]
    assert not refused, refused
    for name in ("constructed-reach", "row-gradients", "constructed-drift"):
        assert figure(app, name).data, name


def test_over_budget_each_part_is_a_refusal_in_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_ENV, "1")  # nothing fits in 1 MB
    monkeypatch.setattr(optimisation, "shipped_trace", lambda *args: None)  # as for a config that is not shipped
    monkeypatch.setattr(optimisation, "_shipped_reports", lambda *args: None)
    for cached in (optimisation._trace, optimisation._constructed_reports):
        cached.clear()
    app = theory()
    refused = [text for text in (w.value.replace("\\", "") for w in app.warning) if MEMORY_ENV in text]  # unescaped
    assert any(w.startswith("No gradient trace here") for w in refused)
    assert any(w.startswith("No training from the construction here") for w in refused)
    assert any(w.startswith("No comparison here") for w in refused)

"""The Sweeps page (AppTest): it opens on the shipped preset sweep without training anything, runs a
small grid on the server and shows it, and refuses a grid over the server's sweep budget."""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from lengen_core.serving.sweep import collapse_summary
from ui import sweeps

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_sweeps() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/sweeps.py").run()
    return app


def charts(app: AppTest) -> list:
    return app.get("vega_lite_chart")


def captions(app: AppTest) -> str:
    return " ".join(c.value for c in app.caption)


def test_the_page_opens_on_the_preset_sweep_and_trains_nothing(monkeypatch):
    monkeypatch.setattr("lengen_core.serving.sweep.run_cell", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    preset = sweeps.preset_result()
    assert preset is not None and len(preset.cells) == 24  # 3 seeds × 4 offsets × RoPE and learned
    app = open_sweeps()
    assert not app.exception, [e.value for e in app.exception]
    assert len(charts(app)) == 4  # accuracy, collapse, carrier argmax, margin and horizon
    text = captions(app)
    summary = collapse_summary(preset.cells)
    assert f"{summary['spread_scaled']:.3f} in the scaled length against {summary['spread_raw']:.3f}" in text
    assert "rope: 12 runs" in text and "learned: 12 runs" in text
    assert "24 runs, each at" in text  # the form's default grid, priced before it runs


def test_a_small_grid_runs_on_the_server_and_is_shown(monkeypatch):
    monkeypatch.setenv("LENGEN_SWEEP_WORKERS", "1")
    app = open_sweeps()
    app.multiselect[0].set_value(["rope"])
    app.text_input[0].set_value("1")  # offsets
    app.text_input[1].set_value("0")  # seeds
    app.select_slider[0].set_value(256)
    app.select_slider[1].set_value(64)
    app.button[0].click().run()
    assert not app.exception, [e.value for e in app.exception]
    runner = sweeps.sweep_runner()
    deadline = time.monotonic() + 300
    while runner.current.running:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert runner.current.error is None and runner.current.result.ran == 1
    app.run()
    shown = app.radio[0]
    assert shown.value.startswith("This server's last sweep (1 runs")
    assert "rope: 1 run," in captions(app) and not app.exception


def test_a_grid_over_the_servers_sweep_budget_is_refused_before_it_runs(monkeypatch):
    monkeypatch.setenv("LENGEN_SWEEP_CELLS", "2")
    app = open_sweeps()
    warnings = " ".join(w.value for w in app.warning).replace("\\", "")  # shown as escaped markdown
    assert "this sweep has 24 cells, over this server's limit of 2 (LENGEN_SWEEP_CELLS)" in warnings
    app.button[0].click().run()
    assert sweeps.sweep_runner().current is None or not sweeps.sweep_runner().current.running

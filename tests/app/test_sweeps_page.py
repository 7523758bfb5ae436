"""The Sweeps page (AppTest): it opens on the shipped preset sweep without training anything, runs a
small grid on the server and shows it, and refuses a grid over the server's sweep budget."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from lengen.sweep import collapse_summary
from tests.helpers.waiting import wait_for
from ui import sweep_panels as sweeps

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
    monkeypatch.setattr("lengen.sweep.run_cell", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
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
    accuracy = json.loads(charts(app)[0].proto.spec)
    assert accuracy["facet"]["field"] == "encoding" and accuracy["resolve"]["scale"]["y"] == "shared"
    assert accuracy["facet"]["sort"] == ["rope", "learned"]  # one panel per encoding of the sweep
    assert "Click a point of the collapse to pick its run" in text  # nothing picked: every run listed
    assert len(app.dataframe[0].value) == 12
    labels = [button.proto.label for button in app.main.get("download_button")]
    assert labels == ["Download the table (CSV)", "Download the table (Parquet)"]


def test_the_parquet_offered_is_the_csv_table_with_its_types():
    table = sweeps.preset_result().table()
    parquet = pd.read_parquet(io.BytesIO(sweeps.parquet_bytes(table)))
    pd.testing.assert_frame_equal(parquet, table)
    pd.testing.assert_frame_equal(parquet, pd.read_csv(io.StringIO(table.to_csv(index=False))))
    assert parquet["learned"].dtype == bool and parquet["length"].dtype == "int64"


def test_a_run_picked_in_the_collapse_is_listed_alone_and_brought_forward_in_the_other_charts():
    cells = pd.DataFrame([{k: v for k, v in c.items() if k != "lengths"} for c in sweeps.preset_result().cells])
    run = cells[(cells.encoding == "rope") & (cells.offset == 5) & (cells.seed == 1)].run_id.item()
    event = {"selection": {"runs": [{"run_id": run}]}}
    picked = sweeps.picked_runs(type("Event", (), event)())
    assert picked == {run} and sweeps.picked_runs(None) == set()
    assert sweeps.per_run_rows(cells, picked).run_id.tolist() == [run]
    assert len(sweeps.per_run_rows(cells, set())) == 12  # nothing picked: every RoPE run
    assert "Picked 1 run (k 5 seed 1)" in sweeps.picked_caption(cells, picked)
    for chart in (sweeps.argmax_chart(cells, picked), sweeps.margin_chart(cells, picked)):
        opacity = chart.to_dict()["layer"][-1]["encoding"]["opacity"] if "layer" in chart.to_dict() else \
            chart.to_dict()["encoding"]["opacity"]
        assert opacity["condition"]["test"] == {"field": "run_id", "oneOf": [run]}
        assert opacity["condition"]["value"] > opacity["value"]


def started(app) -> sweeps.SweepRunner:
    """Press Run the sweep and wait for the server's sweep to end; the runner."""
    app.button[0].click().run()
    assert not app.exception, [e.value for e in app.exception]
    runner = sweeps.sweep_runner()
    wait_for(lambda: not runner.current.running, timeout=300, poll=0.5)
    return runner


def test_a_small_grid_runs_on_the_server_and_is_shown(monkeypatch):
    monkeypatch.setenv("LENGEN_SWEEP_WORKERS", "1")
    app = open_sweeps()
    app.multiselect(key="sweep-encodings").set_value(["rope"])
    app.text_input(key="sweep-offsets").set_value("1")
    app.text_input(key="sweep-seeds").set_value("0")
    app.select_slider[0].set_value(256)
    app.select_slider[1].set_value(64)
    runner = started(app)
    assert runner.current.error is None and runner.current.result.ran == 1
    assert "error" not in runner.current.result.cells[0], runner.current.result.cells[0]  # the worker ran the cell
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


def sweep_warnings(app: AppTest) -> str:
    return " ".join(w.value for w in app.warning).replace("\\", "")


def test_a_delay_task_offers_the_delay_set_axis_and_shows_the_shipped_diversity_sweep(monkeypatch):
    """delay-copy: the form has the delay sets (the diversity sweep's first) and no offsets, the results show
    accuracy against how many delays training saw; bad delay sets are refused with what is allowed; nothing trains."""
    monkeypatch.setattr("lengen.sweep.run_cell", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    app = open_sweeps()
    app.get("button_group")[0].set_value("delay-copy").run()
    assert not app.exception, [e.value for e in app.exception]
    delays = app.text_input(key="sweep-delay-copy-delay_sets")
    assert delays.value == "2;2-4;2-8;2-16"
    assert not any(box.label == "Offsets k" for box in app.text_input)
    assert app.radio[0].value.startswith("The diversity sweep")
    assert "From 1 training delay to 15 (delay-copy, length 32, 2 seeds a point)" in captions(app)
    assert "24 runs, each read at every delay of its training length" in captions(app)
    for bad, message in (("2;9-", "'9-' is not a delay or a range; write e.g. '2-8'"),
                         ("2;2-40", "the cell with train_length 32, delays 2-40"),
                         (";", "the grid's delay sets are empty: give at least one")):
        app.text_input(key="sweep-delay-copy-delay_sets").set_value(bad)
        app.button[0].click().run()
        assert message in sweep_warnings(app), (bad, sweep_warnings(app))
    assert sweeps.sweep_runner().current is None or not sweeps.sweep_runner().current.running


@pytest.mark.slow  # trains one delay run (a few seconds) on the server's sweep thread
def test_a_delay_sweep_runs_on_the_server_and_is_shown_against_the_delay_count(monkeypatch):
    monkeypatch.setenv("LENGEN_SWEEP_WORKERS", "1")
    app = open_sweeps()
    app.get("button_group")[0].set_value("delay-copy").run()
    app.multiselect(key="sweep-delay-copy-encodings").set_value(["rope"])
    app.text_input(key="sweep-delay-copy-seeds").set_value("0")
    app.text_input(key="sweep-delay-copy-train_lengths").set_value("16")
    app.text_input(key="sweep-delay-copy-delay_sets").set_value("2-4")
    runner = started(app)
    cell = runner.current.result.cells[0]
    assert runner.current.error is None and "error" not in cell, cell
    app.run()
    assert app.radio[0].value.startswith("This server's last sweep (1 runs")
    assert f"rope {cell['mean_near_unseen']:.2f} → {cell['mean_near_unseen']:.2f} next to its range" in captions(app)
    assert "(delay-copy, length 16, 1 seed a point)" in captions(app)

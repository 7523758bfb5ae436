"""Sweeps (lengen.sweep): a grid of cells trained or read from the store, measured in
worker processes, gathered into one table; resumed, not redone; a bad cell reported, not fatal."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import threading

import pandas as pd
import pytest

from lengen.cli import build_parser, main
from lengen.presets import PRESETS
from lengen.store import RunStore
from lengen.sweep import (
    AXES,
    GRID_AXES,
    SweepError,
    SweepGrid,
    cell_config,
    grid_from_toml,
    run_sweep,
    sweep_dir,
)

GRID = SweepGrid(encodings=("rope", "learned"), offsets=(1, 3), seeds=(0,), lengths=(16, 64), samples=64,
                 base=(("steps", 400), ("d_model", 32), ("qk_init", 1.0)))  # learns in seconds on one thread
FIGURES = ["run_id", "learned", "steps", "m_out", "argmax_offset", "predicted_horizon", "measured_horizon",
           "length", "accuracy", "target_mass"]


def test_the_grid_is_the_product_of_its_axes_over_the_base_settings():
    assert GRID.size == 4 and len(GRID.cells()) == 4
    assert GRID.cells()[1] == {"encoding": "rope", "attention": "softmax", "offset": 3, "train_length": 16,
                               "vocab_size": 16, "seed": 0}
    config = cell_config(GRID, GRID.cells()[3])
    assert (config.model.encoding, config.task.offset, config.train.steps, config.model.d_model) == ("learned", 3, 400, 32)
    assert SweepGrid.from_dict(GRID.to_dict()) == GRID and SweepGrid.from_dict(GRID.to_dict()).sweep_id() == GRID.sweep_id()
    assert SweepGrid(seeds=(0, 0, 1)).seeds == (0, 1)  # a repeated value is one cell, not two


@pytest.mark.parametrize("changes,message", [
    (dict(seeds=tuple(range(600))), "at most 512"), (dict(offsets=()), "offsets are empty"),
    (dict(lengths=tuple(range(2, 40))), "at most 16"), (dict(base=(("steps", -1),)), "base settings"),
])
def test_a_grid_out_of_bounds_says_what_is_allowed(changes, message):
    with pytest.raises(SweepError, match=message):
        SweepGrid(**changes)


def test_a_sweep_runs_every_cell_and_a_second_run_trains_nothing(tmp_path):
    first = run_sweep(GRID, tmp_path, workers=2)
    assert not first.cancelled and first.ran == 4 and first.trained == 4
    table = first.table()
    assert len(table) == 4 * 2 and "error" not in table
    rope = table[(table.encoding == "rope") & (table.length == 16)]
    assert rope.learned.all() and (rope.accuracy > 0.9).all()
    assert set(table.run_id) == {cell_config(GRID, cell).run_id() for cell in GRID.cells()}
    assert all(RunStore(tmp_path).exists(run_id) for run_id in table.run_id)
    again = run_sweep(GRID, tmp_path, workers=2)
    assert again.ran == 0 and again.trained == 0  # every cell read back
    pd.testing.assert_frame_equal(again.table()[FIGURES], table[FIGURES])
    parquet, csv = pd.read_parquet(first.parquet_path), pd.read_csv(first.csv_path)
    assert first.parquet_path.parent == first.csv_path.parent == sweep_dir(tmp_path, GRID.sweep_id())
    pd.testing.assert_frame_equal(parquet, csv)  # the same frame, dtypes included
    pd.testing.assert_frame_equal(parquet, again.table())
    kinds = parquet.dtypes
    assert kinds["learned"] == bool and kinds["length"] == "int64" and kinds["offset"] == "int64"
    assert kinds["accuracy"] == "float64" and kinds["m_out"] == "float64" and pd.api.types.is_string_dtype(kinds["run_id"])


@pytest.mark.slow  # 26 s in the fast tier; test_a_sweep_runs_every_cell_and_a_second_run_trains_nothing stays there
def test_a_cancelled_sweep_resumes_where_it_left_off_and_gives_the_same_table(tmp_path):
    cancel, seen = threading.Event(), []

    def stop_after_first(progress):
        seen.append(progress.done)
        cancel.set()

    partial = run_sweep(GRID, tmp_path / "a", workers=1, progress=stop_after_first, cancel=cancel)
    assert partial.cancelled and 1 <= partial.ran < 4
    assert any("cancelled" in cell.get("error", "") for cell in partial.cells)
    finished = list((sweep_dir(tmp_path / "a", GRID.sweep_id()) / "cells").glob("*.json"))
    assert len(finished) == partial.ran
    resumed = run_sweep(GRID, tmp_path / "a", workers=2)
    assert resumed.ran == 4 - partial.ran and not resumed.cancelled
    shutil.rmtree(sweep_dir(tmp_path / "a", GRID.sweep_id()))  # the same sweep from scratch, its runs stored
    whole = run_sweep(GRID, tmp_path / "a", workers=2)
    assert whole.ran == 4 and whole.trained == 0
    pd.testing.assert_frame_equal(resumed.table()[FIGURES], whole.table()[FIGURES])


def test_an_invalid_cell_is_reported_and_the_others_finish(tmp_path):
    grid = SweepGrid(offsets=(3, 20), seeds=(0,), lengths=(16, 32), samples=64, base=(("steps", 40), ("d_model", 32)))
    result = run_sweep(grid, tmp_path, workers=1)
    bad, good = result.cells[1], result.cells[0]
    assert "offset 20 must be smaller than the training length 16" in bad["error"]
    assert "error" not in good and good["run_id"] and good["lengths"]
    assert not (sweep_dir(tmp_path, grid.sweep_id()) / "cells" / "1.json").exists()  # tried again next time
    parquet = pd.read_parquet(result.parquet_path)  # the error row kept beside the good cell's rows
    pd.testing.assert_frame_equal(parquet, result.table())
    assert parquet["error"].notna().sum() == 1 and parquet["accuracy"].dtype == "float64"


def test_an_unknown_backend_is_refused_before_any_work(tmp_path):
    with pytest.raises(SweepError, match="allowed local, ray"):
        run_sweep(GRID, tmp_path, backend="slurm")
    assert not (tmp_path / "sweeps").exists()


def test_one_registry_names_each_axis_in_the_grid_the_file_the_options_and_the_table(tmp_path):
    assert GRID_AXES == ("encoding", "attention", "offset", "train_length", "vocab_size", "seed", "delays")  # cell order
    assert {axis.field for axis in AXES} <= {item.name for item in dataclasses.fields(SweepGrid)}
    assert tuple(GRID.axes) == GRID_AXES[:-1]  # no delay sets: a grid of the length tasks, its cells as before
    parser = build_parser()
    for axis in AXES:  # each axis's option, named after its field
        value = "rope" if axis.kind is str else "3"
        assert getattr(parser.parse_args(["sweep", axis.flag, value]), axis.field) == [axis.kind(value)]
    for spelling in ("--vocab-sizes", "--vocabs"):  # the older spelling still works
        assert parser.parse_args(["sweep", spelling, "8,16"]).vocab_sizes == [8, 16]
    grid_file = tmp_path / "grid.toml"
    grid_file.write_text("vocabs = [8, 16]\n")  # the older TOML key, read as vocab_sizes
    assert SweepGrid(**{key: tuple(value) for key, value in grid_from_toml(grid_file).items()}).vocab_sizes == (8, 16)
    grid_file.write_text("vocabs = [8]\nvocab_sizes = [16]\n")
    with pytest.raises(SweepError, match="both vocabs and vocab_sizes"):
        grid_from_toml(grid_file)


def test_the_command_line_runs_a_grid_from_a_toml_file_and_options(tmp_path, monkeypatch):
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    grid_file = tmp_path / "grid.toml"
    grid_file.write_text('encodings = ["rope"]\noffsets = [1, 99]\nlengths = [16, 64]\nsamples = 64\n'
                         '[base]\nsteps = 400\nd_model = 32\nqk_init = 1.0\n')
    out, err = io.StringIO(), io.StringIO()
    assert main(["sweep", "--grid", str(grid_file), "--seeds", "0", "--workers", "1", "--json"], out, err) == 0, err.getvalue()
    answer = json.loads(out.getvalue())
    good, bad = answer["cells"]
    assert (good["encoding"], good["offset"], good["seed"]) == ("rope", 1, 0) and good["run_id"].startswith("rope-")
    assert good["learned"] and [row["length"] for row in good["lengths"]] == [16, 64]
    assert {"m_out", "predicted_horizon", "argmax_offset"} <= set(good) and "offset 99" in bad["error"]
    assert answer["sweep_id"].startswith("sweep-") and set(answer["collapse"]) >= {"variable", "rms", "points"}
    assert pd.read_csv(answer["table"]).shape[0] == 3  # two lengths of the good cell, one row for the bad
    for argv, message in ((["--grid", str(tmp_path / "none.toml")], "cannot read the grid file"),
                          (["--set", "colour=red"], "give NAME=VALUE with a config setting"),
                          (["--offsets", "a,b"], "expected int values")):
        err = io.StringIO()
        assert main(["sweep", *argv], io.StringIO(), err) == 2 and message in err.getvalue(), err.getvalue()


def test_a_cell_that_is_a_shipped_preset_is_read_not_trained(tmp_path):
    grid = SweepGrid(encodings=("learned",), seeds=(0,), lengths=(16, 32), samples=64)  # the Learned (APE) preset
    result = run_sweep(grid, tmp_path, workers=1)
    assert result.trained == 0 and result.cells[0]["reused"] and result.cells[0]["run_id"] == PRESETS["Learned (APE)"].run_id()

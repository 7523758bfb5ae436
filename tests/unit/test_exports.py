"""The Compare page's CSVs read back as data: keyed by run id, numbers as numbers, each interval in its own
columns around its value (issue 40: 'compare-numbers.csv' stored "8,674" and "6.99 (6.94–7.68; …)" as text,
'compare-accuracy.csv' named runs by label only)."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from pandas.api import types

from lengen.presets import DILUTION_LONGEST, DILUTION_SAMPLES, single_head_presets
from ui.analyses import comparisons
from ui.charts.compare import by_quantity, key_figures, key_numbers
from ui.compare_view import carrier_table, curve_table
from ui.runs import load_run


@pytest.fixture(scope="module")
def compared() -> tuple[dict, dict, dict]:
    """The three single-head presets as the Compare page opens them (their stored first-visit numbers)."""
    labels = {run_id: label for label, run_id in single_head_presets().items()}
    results = comparisons(list(labels), DILUTION_LONGEST, DILUTION_SAMPLES)
    return labels, results, {run_id: load_run(run_id) for run_id in labels}


def read_back(table: pd.DataFrame) -> pd.DataFrame:
    """The table as the downloaded file reads with pandas."""
    return pd.read_csv(io.StringIO(table.to_csv(index=False)))


def test_the_key_numbers_csv_is_keyed_by_run_id_with_numbers_as_numbers(compared) -> None:
    labels, results, runs = compared
    numbers = read_back(key_figures(labels, results, runs))
    assert list(numbers["run_id"]) == list(labels) and list(numbers["label"]) == list(labels.values())
    for column in ("accuracy_at_4x", "m_out", "m_out_low", "m_out_high", "m_out_answers_low", "m_out_answers_high",
                   "horizon_predicted", "horizon_below", "toeplitz", "toeplitz_untrained", "toeplitz_untrained_low",
                   "toeplitz_untrained_high", "carrier_argmax", "samples", "offset", "train_length", "seed"):
        assert types.is_numeric_dtype(numbers[column]), (column, numbers[column].dtype)
    assert types.is_bool_dtype(numbers["learned"])
    texts = numbers.select_dtypes(exclude="number").astype(str)
    assert not texts.apply(lambda column: column.str.fullmatch(r"[\d,.\s()–;-]+")).any().any()  # no number as text


def test_each_interval_holds_its_value(compared) -> None:
    labels, results, runs = compared
    numbers = read_back(key_figures(labels, results, runs)).set_index("run_id")
    fitted = numbers[numbers["m_out"].notna()]
    assert len(fitted) >= 1  # the RoPE preset has a law
    assert (fitted["m_out_low"] <= fitted["m_out"]).all() and (fitted["m_out"] <= fitted["m_out_high"]).all()
    assert (fitted["m_out_answers_low"] <= fitted["m_out"]).all() and (fitted["m_out"] <= fitted["m_out_answers_high"]).all()
    ranged = numbers[numbers["toeplitz_untrained_low"].notna()]
    assert ((ranged["toeplitz_untrained_low"] <= ranged["toeplitz_untrained"])
            & (ranged["toeplitz_untrained"] <= ranged["toeplitz_untrained_high"])).all()
    for run_id, row in numbers.iterrows():  # the horizon's number is the page's; a run without one says why
        horizon = results[run_id].measurement.predicted_horizon
        if horizon is None or horizon.length is None:
            assert pd.isna(row["horizon_predicted"]) and row["horizon_note"].startswith(("none", "n/a", "—"))
        else:
            assert row["horizon_predicted"] == horizon.length < row["horizon_below"]


def test_the_screen_and_the_csv_give_the_same_figures(compared) -> None:
    labels, results, runs = compared
    numbers = key_figures(labels, results, runs).set_index("label")
    shown = by_quantity(key_numbers(labels, results, runs)).set_index("quantity")
    for label, row in numbers.iterrows():
        if pd.notna(row["m_out"]):
            assert shown.loc["m_out (95%)", label].startswith(f"{row['m_out']:.2f} ({row['m_out_low']:.2f}–"
                                                              f"{row['m_out_high']:.2f}")
        if pd.notna(row["horizon_predicted"]):
            assert shown.loc["horizon, predicted", label].startswith(f"{row['horizon_predicted']:,}")
        assert shown.loc["Toeplitz", label] == f"{row['toeplitz']:.3f}"


def test_the_chart_csvs_are_keyed_by_run_id_with_their_intervals(compared) -> None:
    labels, results, _ = compared
    curves = read_back(curve_table(labels, results))
    assert set(curves["run_id"]) == set(labels)
    assert all(set(curves.loc[curves["run_id"] == run_id, "run"]) == {label} for run_id, label in labels.items())
    for column in ("length", "samples", "accuracy", "accuracy_low", "accuracy_high", "target_mass", "predicted_mass"):
        assert types.is_numeric_dtype(curves[column]), column
    assert ((curves["accuracy_low"] <= curves["accuracy"]) & (curves["accuracy"] <= curves["accuracy_high"])).all()
    assert not curves.duplicated(["run_id", "length"]).any()  # one row per run and length
    carriers = read_back(carrier_table(labels, results, 64))
    assert set(carriers["run_id"]) == set(labels) and types.is_numeric_dtype(carriers["s"])
    assert carriers["offset"].max() < 64

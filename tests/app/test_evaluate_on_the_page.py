"""Issue 41's check, end to end: a new run trained at the command line with no options, then `evaluate RUN` with
no options, prints the numbers the Dilution page opens with for it: the accuracy at its longest length with its
interval, m_out with the interval it quotes, the fit's largest error, and the measured and predicted horizons,
each as the page writes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.first_visit import MEASURE_ENV
from tests.helpers.cli import ok_json

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("evaluate-on-the-page")


@pytest.fixture(autouse=True)
def own_store(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LENGEN_HOME", str(home))


@pytest.fixture(scope="module")
def run_id(home: Path) -> str:
    """A small RoPE run that learns and dilutes (V 8, L_train 8, d_model 64; no preset's id), trained as a person
    would (`train`, measured on save) in a store of its own."""
    from ui import runs as ui_runs

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LENGEN_HOME", str(home))
        patch.setenv(MEASURE_ENV, "1")
        trained = ok_json("train", "--d-model", "64", "--vocab", "8", "--train-length", "8", "--device", "cpu", "--json")
    ui_runs.load_run.clear()  # cached by run id: another test's store may hold the same id
    ui_runs._measurement.clear()
    return trained["run_id"]


@pytest.mark.slow  # a training, its measurement and the page (about 20 s); tests/unit/test_cli_default_request.py is quick
def test_the_dilution_page_opens_with_the_numbers_evaluate_prints(run_id: str) -> None:
    answer = ok_json("evaluate", run_id, "--json")
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/dilution.py")
    app.query_params.clear()
    app.query_params.update({"run": run_id})
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    shown = {metric.label: metric for metric in app.metric}

    last, fit = answer["lengths"][-1], answer["fit"]
    accuracy = shown[f"Accuracy at L = {last['length']:,}"]
    assert accuracy.value == f"{last['accuracy']:.2f}"
    assert accuracy.delta == f"95%: {last['accuracy_low']:.3f} to {last['accuracy_high']:.3f}"
    assert fit is not None, answer["fit_reason"]
    assert shown["m_out (fitted)"].value == f"{fit['m_out']:.2f}"
    assert shown["m_out (fitted)"].delta == f"95%: {fit['m_out_lengths_low']:.2f} to {fit['m_out_lengths_high']:.2f}"
    assert shown["Largest error of the fit"].value == f"{fit['max_relative_error']:.0%}"
    measured, below = answer["measured_horizon"], answer["measured_horizon_below"]
    assert shown["Horizon, measured"].value == (f"≥ {measured:,}" if below is None else f"{measured:,}")
    assert shown["Horizon, predicted"].value == f"{answer['predicted_horizon']:,}"

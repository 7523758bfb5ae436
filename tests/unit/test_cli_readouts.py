"""The command line's readouts: the verdict (train, runs, evaluate, carrier), the fitted law with its
interval and status (evaluate), and the carrier's untrained baseline (carrier)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from lengen import cli
from lengen_core.analysis.carrier import ALIGNMENT_MARGIN
from lengen_core.analysis.fit import LAW_TOLERANCE, WEIGHTED_LAW

CONVERGED = ("--device", "cpu")  # the default 1,500-step budget with early stop: a trained head
METRIC_KEYS = {"argmax_offset", "margin", "alignment", "effective_rank", "active_frequencies", "toeplitz_fraction"}


def ok_json(*argv: str) -> Any:
    stdout, stderr = io.StringIO(), io.StringIO()
    assert cli.main(list(argv), stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    return json.loads(stdout.getvalue())


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lengen-home")


@pytest.fixture(autouse=True)
def _store(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LENGEN_HOME", str(home))


@pytest.fixture(scope="module")
def trained_ids(home: Path) -> dict[str, dict[str, Any]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LENGEN_HOME", str(home))
        return {encoding: ok_json("train", "--encoding", encoding, *CONVERGED, "--json") for encoding in ("rope", "learned")}


def test_train_and_runs_report_the_verdict(trained_ids):
    rope, learned = trained_ids["rope"], trained_ids["learned"]
    assert rope["verdict"]["learned"] is True and rope["verdict"]["at_chance_beyond"] is False
    assert learned["verdict"]["learned"] is True and learned["verdict"]["at_chance_beyond"] is True
    assert rope["verdict"]["in_range_accuracy"] >= 0.99
    listed = {run["run_id"]: run["verdict"] for run in ok_json("runs", "--json")["runs"]}
    assert listed[rope["run_id"]] == rope["verdict"] and listed[learned["run_id"]] == learned["verdict"]


@pytest.mark.slow  # a minute on a busy machine; tests/unit/test_fit.py fits the law quickly
def test_evaluate_reports_a_fit_with_an_interval_for_rope(trained_ids, monkeypatch):
    # The horizon search of a d_model 128 head is priced at about 2 min (lengen.budget), over the
    # default request budget: this test is about the answer, not the budget, so it is given 5 min.
    monkeypatch.setenv("LENGEN_REQUEST_SECONDS", "300")
    result = ok_json("evaluate", trained_ids["rope"]["run_id"], "--lengths", "4,16,64,256,1024,4096", "--predict",
                     "--horizon", "--json")
    assert result["fit_status"] == "fitted" and result["verdict"]["learned"]
    fit = result["fit"]
    assert fit["law"] == WEIGHTED_LAW and fit["weighted"]  # far keys counted by their weight: p̂ at 16 is computed
    assert fit["m_out_low"] <= fit["m_out"] <= fit["m_out_high"]
    assert 6.6 <= fit["m_out"] <= 7.5  # measured 7.0 on the default config (5.3 at the old default, d_model 64)
    rows = {row["length"]: row for row in result["lengths"]}
    assert rows[4]["fitted_target_mass"] is None  # inside the training range: the law is not drawn there
    fitted = {n: row for n, row in rows.items() if row["fitted_target_mass"] is not None}
    assert sorted(fitted) == [n for n in (16, 64, 256, 1024, 4096) if rows[n]["target_mass"] > 2 / 16]
    assert 4096 in fitted  # p ≈ 0.2 there, above 2/V (at the old default p ≈ 0.05: past where the law is fitted)
    errors = [abs(row["fitted_target_mass"] / row["target_mass"] - 1) for row in fitted.values()]
    assert max(errors) == pytest.approx(fit["max_relative_error"], rel=1e-9)
    assert fit["max_relative_error"] <= fit["tolerance"] == LAW_TOLERANCE and fit["holds"]
    assert fit["max_relative_error"] < fit["uniform_max_relative_error"]  # each far key counted one: the older law
    plain = fit["plain"]  # the plain two-zone law beside the weighted one, each saying which K(n) it uses
    assert plain["key_count"].startswith("n - L_train") and "weight" in fit["key_count"] and plain["plain"] is None
    assert plain["max_relative_error"] == fit["uniform_max_relative_error"] and not plain["weighted"]
    for law in (fit, plain):  # the interval to quote holds the answers' interval and the fits to fewer lengths
        assert law["m_out_lengths_low"] <= law["m_out_low"] <= law["m_out"] <= law["m_out_high"] <= law["m_out_lengths_high"]
    assert fit["key_lengths"] == sorted(fitted) and fit["key_counts"][0] == 0.0
    assert fit["worst_length"] in fitted
    # the horizon: measured on these lengths (1.00 to 1,024, 0.996 at 4,096: no fall) and predicted by bisection
    # (8,674 on seed 0, between the measured 8,192 and 16,384 of the Dilution page's doublings)
    assert result["horizon_accuracy"] == 0.9
    assert (result["measured_horizon"], result["measured_horizon_below"]) == (4096, None)
    assert 4096 <= result["predicted_horizon"] < 16384 and result["predicted_horizon_below"] == result["predicted_horizon"] + 1


def test_evaluate_fits_no_law_to_a_run_at_chance_beyond(trained_ids):
    result = ok_json("evaluate", trained_ids["learned"]["run_id"], "--lengths", "16,32,64,128", "--predict", "--horizon",
                     "--json")
    assert result["fit"] is None and result["fit_status"] == "at_chance"
    assert all(row["fitted_target_mass"] is None for row in result["lengths"])
    assert result["fit_reason"].startswith("No law")
    assert result["measured_horizon"] == 16 and result["measured_horizon_below"] == 32  # pinned: 1.00 in range only
    assert result["predicted_horizon"] is not None and result["predicted_horizon"] < 32
    # the readable output says the same horizons (it said none before, --horizon or not)
    stdout, stderr = io.StringIO(), io.StringIO()
    assert cli.main(["evaluate", trained_ids["learned"]["run_id"], "--lengths", "16,32,64,128", "--predict", "--horizon"],
                    stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    lines = stdout.getvalue().splitlines()
    assert "measured horizon (accuracy ≥ 0.9 at the lengths asked): 16; below 0.9 at 32" in lines
    assert (f"predicted horizon (from the weights, looked for up to {result['predicted_horizon_ceiling']:,}): "
            f"{result['predicted_horizon']:,}") in lines
    assert any(line.startswith(f"prediction: {result['prediction_status']}: ") for line in lines)


def test_carrier_reports_the_untrained_baseline_with_the_same_keys(trained_ids):
    rope = ok_json("carrier", trained_ids["rope"]["run_id"], "--search-length", "4096", "--json")
    learned = ok_json("carrier", trained_ids["learned"]["run_id"], "--search-length", "4096", "--json")
    for result in (rope, learned):
        assert METRIC_KEYS <= set(result) and set(result["baseline"]) == METRIC_KEYS
        assert result["alignment_margin_needed"] == ALIGNMENT_MARGIN
    assert rope["alignment"] is True and rope["baseline"]["alignment"] is False
    # Concentrated in frequency (14 of 64 active, untrained 64); not lower in effective rank at d_model 128 with
    # qk_init 0.1 (20 against 19; at the old default 8 against 16): docs/science.md §6.
    assert rope["active_frequencies"] * 2 <= rope["baseline"]["active_frequencies"]
    assert learned["alignment"] is False  # its peak at k is by 0.51 nats
    assert learned["toeplitz_fraction"] < 0.3 and learned["baseline"]["toeplitz_fraction"] > 0.9
    # every baseline with its own interval: each metric's range over 8 untrained initialisations, exact values
    for result in (rope, learned):
        spread = result["baseline_range"]
        assert result["metrics_exact"] is True and spread["seeds"] == 8
        for name in ("margin", "effective_rank", "active_frequencies", "toeplitz_fraction"):
            low, high = spread[name]
            assert low <= result["baseline"][name] <= high, name
    assert rope["baseline_range"]["toeplitz_fraction"] == [pytest.approx(1.0), pytest.approx(1.0)]
    assert learned["toeplitz_fraction"] < learned["baseline_range"]["toeplitz_fraction"][0]  # 0.065 < 0.238
    assert len(learned["carrier"]) == 16  # a learned table: the training range only


def test_the_readable_outputs_name_the_verdict_and_the_law(trained_ids):
    stdout, stderr = io.StringIO(), io.StringIO()
    assert cli.main(["evaluate", trained_ids["learned"]["run_id"], "--lengths", "16,32,64"], stdout, stderr) == 0
    text = stdout.getvalue()
    assert "verdict: learned the task (1.00 at the training length 16); at chance past it." in text
    assert "No law: this run is at chance past its training length" in text

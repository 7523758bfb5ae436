"""`evaluate RUN` with no options asks what the app asks (issue 41): for a single head the Dilution page's first
view, lengen.first_visit's default request, so it prints the numbers the page opens with. Checked on a new run
saved as every training saves one (measured on save), against the very call the page makes
(ui.runs.dilution_data at the page's default lengths and samples), to the digit; and like the page it reads the
numbers stored with the run and computes none of them again.

The run is small (V 8, L_train 8, d_model 64: 2 s to train, 4 s to measure on save) yet learns and dilutes, so it
has a fitted law and a predicted horizon to compare; its id is no preset's (a preset's shipped numbers would
answer the page for it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lengen import cli
from lengen.first_visit import FIRST_VISIT_SAMPLES, MEASURE_ENV, request_lengths, save_run
from lengen.presets import DILUTION_LONGEST, DILUTION_SAMPLES, dilution_lengths
from lengen.results import finite
from lengen.store import RunStore
from lengen_core import measure as measure_module
from lengen_core.analysis.rules import make_rule
from tests.helpers.cli import ok_json, run_cli

SMALL = {"d_model": 64, "vocab_size": 8, "train_length": 8}


@pytest.fixture(scope="module")
def stored(trained, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The small run (trained once for the session), saved in a store of its own as a training saves it."""
    home = tmp_path_factory.mktemp("default-request")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MEASURE_ENV, "1")
        run_id = save_run(RunStore(home), trained(**SMALL))
    assert RunStore(home).first_visit(run_id) is not None
    return home, run_id


def page_data(run_id: str):
    """What pages/dilution.py measures when it opens on `run_id` (its default longest length and samples)."""
    from ui import runs as ui_runs

    ui_runs.load_run.clear()  # cached by run id: another test's store may hold the same id
    ui_runs._measurement.clear()
    run = ui_runs.load_run(run_id)
    lengths = tuple(ui_runs.allowed_lengths(run_id, list(dilution_lengths(run.config, DILUTION_LONGEST))))
    return ui_runs.dilution_data(run_id, lengths, DILUTION_SAMPLES)


def test_evaluate_with_no_options_prints_the_dilution_pages_numbers(stored, monkeypatch):
    home, run_id = stored
    monkeypatch.setenv("LENGEN_HOME", str(home))

    def refuse(*args, **kwargs):
        raise AssertionError("evaluate computed again what the run was stored with")

    with monkeypatch.context() as patch:  # the page reads the stored numbers; so does the command line
        for name in ("evaluate", "predict_at", "predicted_horizon", "fit_dilution"):
            patch.setattr(measure_module, name, refuse)
        answer = ok_json("evaluate", run_id, "--json")
    page = page_data(run_id)
    table, m = page.table, page.measurement
    rows = answer["lengths"]
    assert [row["length"] for row in rows] == table["length"].tolist()
    for column in ("samples", "accuracy", "accuracy_low", "accuracy_high", "target_mass", "target_mass_sem",
                   "vote_accuracy", "predicted_accuracy"):
        assert [row[column] for row in rows] == table[column].tolist(), column
    assert [row["predicted_target_mass"] for row in rows] == table["predicted_mass"].tolist()
    assert m.fit.fit is not None and answer["fit_status"] == m.fit.status == "fitted"  # a law to compare
    # m_out, its intervals, the errors: the page's metrics and caption (as JSON writes them: lists, no infinities)
    assert answer["fit"] == json.loads(json.dumps(finite(m.fit.fit.to_dict())))
    assert [row["fitted_target_mass"] for row in rows] == m.fitted_masses
    assert (answer["measured_horizon"], answer["measured_horizon_below"]) == (m.measured_horizon.length,
                                                                              m.measured_horizon.below)
    assert (answer["predicted_horizon"], answer["predicted_horizon_below"], answer["predicted_horizon_ceiling"]) == (
        m.predicted_horizon.length, m.predicted_horizon.below, m.horizon_ceiling)
    assert answer["predicted_horizon"] is not None and answer["predicted_horizon_reason"] is None
    assert (answer["prediction_status"], answer["prediction_status_reason"]) == (m.prediction_status.status,
                                                                                 m.prediction_status.reason)

    shown = run_cli("evaluate", run_id)  # the readable form: the same measurement
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    table = [line.split() for line in lines[1:1 + len(rows)]]
    assert [(int(cells[0]), cells[1]) for cells in table] == [(row["length"], f"{row['accuracy']:.3f}") for row in rows]
    assert (f"predicted horizon (from the weights, looked for up to {answer['predicted_horizon_ceiling']:,}): "
            f"{answer['predicted_horizon_text']}") in lines


def test_the_request_is_the_apps_unless_an_option_replaces_its_half(learned):
    """`evaluation_request`: the default request's lengths for a single head (a learned table's end stops them),
    256 sequences; --lengths and --samples each replace their half."""
    parsed = cli.build_parser().parse_args(["evaluate", "any-run"])
    assert (parsed.lengths, parsed.samples) == (None, None)  # unset: the app's request, worked out per run
    assert cli.evaluation_request(learned, None, None) == (request_lengths(learned), FIRST_VISIT_SAMPLES)
    assert request_lengths(learned) == (4, *(16 << i for i in range(9)))  # k + 1, then 16 … 4,096, the table's end
    assert cli.evaluation_request(learned, None, 32) == (request_lengths(learned), 32)
    assert cli.evaluation_request(learned, [16, 64], None) == ((16, 64), FIRST_VISIT_SAMPLES)
    # under a rule, the page's rules view: the same ladder up to 2^14 (ui.analyses.rule_lengths)
    assert cli.evaluation_request(learned, None, None, make_rule("log-n"))[0] == (4, *(16 << i for i in range(9)))


def test_under_a_rule_the_default_request_stops_where_the_pages_rules_do(rope):
    lengths, samples = cli.evaluation_request(rope, None, None, make_rule("ntk"))
    assert lengths == tuple(n for n in request_lengths(rope) if n <= 1 << 14) and lengths[-1] == 1 << 14
    assert request_lengths(rope)[-1] == 1 << 16 and samples == FIRST_VISIT_SAMPLES

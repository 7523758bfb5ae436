"""One measurement (lengen_core.measure, issue 25): the command line's `evaluate`, a sweep's cell and the
app's accessors (the Dilution page's `dilution_data`, the Compare page's `comparison`) give the same
numbers for the same run and request, and the one policy holds where the three copies used to differ.

Each reader runs the whole chain itself, in this process and on the CPU, so the numbers agree to the
last bit; they are compared to a relative 1e-9 all the same, which a different chain (other lengths
for the prediction, another horizon ceiling) misses by far.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest

from lengen import cli
from lengen.runtime import DEVICE_ENV
from lengen.store import RunStore
from lengen.sweep import run_cell
from lengen_core.analysis.horizon import horizon_ceiling
from lengen_core.analysis.rules import make_rule
from lengen_core.config import RunConfig, with_changes
from lengen_core.measure import measure
from lengen_core.training import Run, train

SAMPLES = 64
# Small and quick: V 8 and L 8 keep the prediction's V³ work and the horizon's search short.
SMALL = dict(vocab_size=8, train_length=8, offset=3)
ROPE = with_changes(RunConfig(), **SMALL, steps=300)
LEARNED = with_changes(RunConfig(), **SMALL, encoding="learned", max_positions=128, steps=300)
TRANSFORMER = with_changes(RunConfig(), **SMALL, n_layers=1, n_heads=2, d_model=32, steps=40)


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


class Stored(dict):
    """config -> its run, trained on the CPU the first time a test asks and saved in this session's store."""

    def __missing__(self, config: RunConfig) -> Run:
        run = self[config] = train(config, "cpu")
        RunStore().save(run)
        return run


@pytest.fixture(scope="module")
def stored() -> Stored:
    return Stored()


@pytest.fixture(autouse=True)
def app_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEVICE_ENV, "cpu")  # the app's analyses compute where the command line's do here


def from_cli(run_id: str, lengths: tuple[int, ...]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["evaluate", run_id, "--lengths", ",".join(map(str, lengths)), "--samples", str(SAMPLES),
                       "--device", "cpu", "--predict", "--horizon", "--json"], out, err)
    assert status == 0, err.getvalue()
    answer = json.loads(out.getvalue())
    fit = answer["fit"] or {}
    return {"accuracy": [row["accuracy"] for row in answer["lengths"]],
            "target_mass": [row["target_mass"] for row in answer["lengths"]],
            "m_out": fit.get("m_out"), "m_out_low": fit.get("m_out_low"), "m_out_high": fit.get("m_out_high"),
            "measured_horizon": answer["measured_horizon"], "predicted_horizon": answer["predicted_horizon"]}


def from_sweep(config: RunConfig, lengths: tuple[int, ...]) -> dict[str, Any]:
    cell = run_cell(str(RunStore().root), config.to_dict(), lengths, SAMPLES, "cpu")
    assert cell["reused"]  # the stored run, not another training
    return {"accuracy": [row["accuracy"] for row in cell["lengths"]],
            "target_mass": [row["target_mass"] for row in cell["lengths"]],
            **{key: cell[key] for key in ("m_out", "m_out_low", "m_out_high", "measured_horizon",
                                          "predicted_horizon")}}


def from_app(run_id: str, lengths: tuple[int, ...]) -> list[dict[str, Any]]:
    """What the Dilution page and the Compare page read (the measurement, then each page's own shape)."""
    from ui.analyses import comparison
    from ui.runs import dilution_data, measurement

    m = measurement(run_id, lengths, SAMPLES)
    fit = m.fit.fit
    horizons = {"measured_horizon": None if m.measured_horizon is None else m.measured_horizon.length,
                "predicted_horizon": None if m.predicted_horizon is None else m.predicted_horizon.length}
    laws = {"m_out": None if fit is None else fit.m_out, "m_out_low": None if fit is None else fit.m_out_low,
            "m_out_high": None if fit is None else fit.m_out_high}
    shown = [{"accuracy": [r.accuracy for r in m.reports], "target_mass": [r.target_mass for r in m.reports],
              **laws, **horizons}]
    if m.closed_form:
        table = dilution_data(run_id, lengths, SAMPLES).table
        shown.append({"accuracy": list(table["accuracy"]), "target_mass": list(table["target_mass"]), **laws,
                      **horizons})
    compared = comparison(run_id, max(lengths), SAMPLES)
    assert compared.lengths == lengths  # the doublings of L_train up to the longest: the same request
    if m.closed_form:  # the horizon as the Compare page's key numbers and the rules table (rule none) write it
        from ui.charts.compare import key_numbers
        from ui.rules.captions import BELOW, UP_TO, horizon_cells
        from ui.rules.view import _measure, _rows
        from ui.runs import Progress, load_run

        run = load_run(run_id)
        text = m.predicted_horizon.text
        assert key_numbers({run_id: "run"}, {run_id: compared}, {run_id: run})["horizon, predicted"][0] == text
        ruled = {"none": _measure(run_id, "none", lengths, SAMPLES, Progress("Reading under the rules"))}
        row = _rows("this run", run.config, True, ruled)[0][0]
        up_to, below = row[f"{UP_TO}, predicted"], row[f"{BELOW}, predicted"]  # the same horizon, in two cells
        assert f"{m.predicted_horizon.length:,}" in up_to and (up_to, below) == horizon_cells(m.predicted_horizon)
    law = compared.fit.fit
    shown.append({"accuracy": list(compared.accuracy), "target_mass": list(compared.target_mass),
                  "m_out": None if law is None else law.m_out, "m_out_low": None if law is None else law.m_out_low,
                  "m_out_high": None if law is None else law.m_out_high, **horizons})
    return shown


def assert_same(reference: dict[str, Any], other: dict[str, Any], who: str) -> None:
    for key, value in reference.items():
        if isinstance(value, list):
            assert len(value) == len(other[key]) and all(map(close, value, other[key])), (who, key, value, other[key])
        else:
            assert close(value, other[key]), (who, key, value, other[key])


def agree(config: RunConfig, run: Run, lengths: tuple[int, ...]) -> dict[str, Any]:
    cli_numbers = from_cli(run.run_id, lengths)
    assert_same(cli_numbers, from_sweep(config, lengths), "sweep cell")
    for shown in from_app(run.run_id, lengths):
        assert_same(cli_numbers, shown, "app")
    return cli_numbers


def test_a_learned_table_reads_the_same_everywhere(stored):
    numbers = agree(LEARNED, stored[LEARNED], (8, 16, 32, 64))
    assert numbers["accuracy"][0] >= 0.9  # it learned its task, and was measured at all four lengths
    # its predicted horizon is looked for up to the end of its table, by every reader
    assert numbers["predicted_horizon"] is None or numbers["predicted_horizon"] <= 128


def test_a_transformer_reads_the_same_everywhere(stored):
    numbers = agree(TRANSFORMER, stored[TRANSFORMER], (8, 16))
    assert numbers["m_out"] is None and numbers["predicted_horizon"] is None  # forward passes: no closed form
    assert all(0.0 <= a <= 1.0 for a in numbers["accuracy"])


@pytest.mark.slow
def test_a_rope_head_reads_the_same_everywhere(stored):
    # to 128: at 64 samples p's fall from 32 to 64 (0.865 to 0.832) is within the law test's 3.5 standard
    # errors, so up to 64 it is rightly no_dilution (lengen_core.analysis.trend); one doubling on it falls
    numbers = agree(ROPE, stored[ROPE], (8, 16, 32, 64, 128))
    # a fitted law and a horizon past the longest length measured: the numbers the copies disagreed on
    assert numbers["m_out"] is not None and numbers["m_out_low"] <= numbers["m_out"] <= numbers["m_out_high"]
    assert numbers["predicted_horizon"] > 128 and numbers["measured_horizon"] == 128


def test_the_horizon_is_looked_for_over_the_whole_range_as_trained_and_to_the_longest_length_under_a_rule(stored):
    run = stored[LEARNED]
    as_trained = measure(run, (8, 16), SAMPLES)
    assert as_trained.horizon_ceiling == horizon_ceiling(run.model) == 128 and as_trained.horizon_note is None
    assert as_trained.predicted_horizon is not None and as_trained.predicted_horizon.ceiling <= 128
    ruled = measure(run, (8, 16), SAMPLES, rule=make_rule("log-n"))
    assert ruled.horizon_ceiling == 16
    assert ruled.horizon_note == "under log-n, looked for up to the longest length evaluated, 16"
    assert [r.rule for r in ruled.reports] == ["log-n", "log-n"]


def test_the_prediction_includes_the_training_length_and_a_run_that_did_not_learn_gets_one():
    run = train(with_changes(RunConfig(), **SMALL, steps=5), "cpu")  # 5 steps learn nothing
    assert not run.verdict.learned
    m = measure(run, (16, 32, 64), SAMPLES)  # no length at L_train: it is predicted all the same
    assert m.train_prediction is not None and m.train_prediction.length == 8
    assert [p.length for p in m.predictions] == [16, 32, 64]
    assert m.predicted_horizon is not None  # the weights' horizon: none at all, or where they reach
    assert m.fit.status == "not_learned" and m.fit.fit is None  # only the law is gated by the verdict

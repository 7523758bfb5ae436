"""`python -m lengen absolute RUN_ID`: the position probe, the interventions and the denominators of a
transformer run (lengen_core.analysis.absolute), as JSON and as lines; refusals in one line."""

from __future__ import annotations

import pytest

from lengen.presets import preset_ids
from tests.helpers.cli import run_cli, strict_json


@pytest.fixture(scope="module")
def answer() -> dict:
    outcome = run_cli("absolute", preset_ids()["Transformer RoPE"], "--samples", "16", "--device", "cpu", "--json")
    assert outcome.code == 0, outcome.stderr
    return strict_json(outcome.stdout)


def test_absolute_json_has_the_probe_the_interventions_and_every_head(answer: dict) -> None:
    probe = answer["probe"]
    assert answer["length"] == 16 and answer["sink_length"] == 64 and answer["samples"] == 16
    assert len(probe["r2"]) == len(probe["untrained_low"]) == len(probe["untrained_high"]) == 3
    assert probe["beats"][0] is None and all(isinstance(b, bool) for b in probe["beats"][1:])
    assert all(low <= high for low, high in zip(probe["untrained_low"], probe["untrained_high"], strict=True))
    assert probe["finding"].startswith("the probe")
    names = [v["name"] for v in answer["interventions"]]
    assert names[0] == "as trained" and "first token" in names[1] and "positions +" in names[2]
    trained, _, moved = answer["interventions"]
    assert moved["r2"] == pytest.approx(trained["r2"], abs=1e-4)  # RoPE: the shift changes nothing
    assert len(answer["heads"]) == 4
    first = answer["heads"][0]
    assert first["sink"]["0"] == pytest.approx(1.0)  # query 0 sees only key 0
    assert first["exact_log_denominator"] is not None and answer["heads"][2]["exact_log_denominator"] is None


def test_absolute_readable_output_lists_layers_and_heads() -> None:
    outcome = run_cli("absolute", preset_ids()["Transformer RoPE"], "--samples", "8", "--device", "cpu")
    assert outcome.code == 0, outcome.stderr
    assert "position probe at length 16" in outcome.stdout and "(the embeddings, not part of the claim)" in outcome.stdout
    assert "layer 1 head 1: weight on key 0" in outcome.stdout


def test_absolute_on_the_minimal_head_reads_its_denominators_exactly() -> None:
    outcome = run_cli("absolute", preset_ids()["RoPE"], "--samples", "256", "--device", "cpu", "--json")
    assert outcome.code == 0, outcome.stderr
    found = strict_json(outcome.stdout)
    assert "probe" not in found and "no residual stream" in found["note"]
    assert set(found["log_denominator"]) == set(found["exact_log_denominator"]) == {"0", "1", "15", "63"}
    for t, exact in found["exact_log_denominator"].items():
        assert found["log_denominator"][t] == pytest.approx(exact, abs=0.3)


@pytest.mark.parametrize(("argv", "message"), [
    (("absolute", "RoPE + linear attention"), "linear attention has none"),
    (("absolute", "Transformer RoPE", "--samples", "2"), "at least 4"),
    (("absolute", "Transformer RoPE", "--length", "2"), "larger than the offset"),
    (("absolute", "Transformer RoPE", "--length", "5000"), "limit for the position probe"),
])
def test_absolute_refuses_bad_requests_in_one_line(argv: tuple[str, ...], message: str) -> None:
    command, label, *rest = argv
    outcome = run_cli(command, preset_ids()[label], *rest, "--device", "cpu")
    assert outcome.code == 2
    assert message in outcome.stderr and outcome.stderr.count("\n") == 1 and "Traceback" not in outcome.stderr


def test_absolute_under_the_budget_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LENGEN_REQUEST_SECONDS", "1")
    outcome = run_cli("absolute", preset_ids()["Transformer RoPE"], "--samples", "256", "--device", "cpu", "--budget")
    assert outcome.code == 2
    assert "this position probe would take about" in outcome.stderr and "fewer samples" in outcome.stderr

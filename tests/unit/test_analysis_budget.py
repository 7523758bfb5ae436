"""The carrier extraction and the prediction from the weights are priced like every other request:
an estimate from the config and the request, checked by the command line and the app before any
work, a refusal naming the budget and what to change; and the estimates cover the peak memory
measured in a fresh process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lengen import cli
from lengen.budget import (
    MEMORY_ENV,
    SECONDS_ENV,
    BudgetError,
    Budgets,
    carrier_cost,
    check,
    check_carrier,
    check_prediction,
    prediction_cost,
)
from lengen.store import RunStore
from lengen_core import measure
from lengen_core.config import MAX_D_MODEL, MAX_EVAL_LENGTH, MAX_VOCAB, RunConfig, with_changes
from lengen_core.training import train

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BUDGETS = Budgets(3_072 << 20, 120.0, 1_800.0)
DOUBLINGS = [16 << p for p in range(17)]  # the Dilution page's longest sweep of the default run: 16 … 2^20
WIDEST = with_changes(RunConfig(), vocab_size=MAX_VOCAB, d_model=MAX_D_MODEL)  # the largest single head


@pytest.fixture
def stored(tmp_path, monkeypatch) -> str:
    """A 3-step single-head run in a fresh store that the command line reads."""
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    run = train(with_changes(RunConfig(), steps=3, seed=77), "cpu")
    RunStore().save(run)
    return run.run_id


def refuse_work(*_args, **_kwargs):
    raise AssertionError("the work started before the budget was checked")


def test_what_the_pages_ask_of_the_default_run_fits_the_default_budgets():
    config = RunConfig()
    for search in (1 << 16, MAX_EVAL_LENGTH):  # the Carrier page's default and its longest search
        check(carrier_cost(config, search), DEFAULT_BUDGETS)
    check(prediction_cost(config, DOUBLINGS), DEFAULT_BUDGETS)
    for encoding in ("learned", "sinusoidal", "alibi", "nope"):
        changed = with_changes(config, encoding=encoding)
        check(carrier_cost(changed, MAX_EVAL_LENGTH), DEFAULT_BUDGETS)
        check(prediction_cost(changed, [n for n in DOUBLINGS if n <= 4_096]), DEFAULT_BUDGETS)


def test_the_widest_head_searched_to_the_end_is_refused_naming_the_knob():
    """V = 64, d_model 512: s_ab(Δ) for 4,096 token pairs × 512 dimensions at a million offsets."""
    with pytest.raises(BudgetError) as refused:
        check(carrier_cost(WIDEST, MAX_EVAL_LENGTH), DEFAULT_BUDGETS)
    assert SECONDS_ENV in str(refused.value) and "shorter near-recurrence search" in str(refused.value)
    # the price is the search run to its end, and the refusal says so: the weights may end it sooner
    assert "would take about 5.7 min (at most: the search ends at its 50th near-recurrence)" in str(refused.value)
    check(carrier_cost(WIDEST, 1 << 16), DEFAULT_BUDGETS)  # the page's default search fits
    with pytest.raises(BudgetError) as refused:
        check(prediction_cost(WIDEST, DOUBLINGS), DEFAULT_BUDGETS)
    assert SECONDS_ENV in str(refused.value) and "fewer lengths, or a shorter longest length" in str(refused.value)


def test_the_estimates_grow_with_the_request():
    assert carrier_cost(WIDEST, 1 << 20).seconds > 8 * carrier_cost(WIDEST, 1 << 16).seconds
    assert prediction_cost(WIDEST, DOUBLINGS).seconds > prediction_cost(WIDEST, DOUBLINGS[:13]).seconds
    learned = with_changes(RunConfig(), encoding="learned")  # not relative: one sweep per length
    assert prediction_cost(learned, [1024, 2048]).seconds > prediction_cost(learned, [2048]).seconds
    with pytest.raises(BudgetError, match=f"this prediction would need .* \\({MEMORY_ENV}\\)"):
        check(prediction_cost(RunConfig(), [16]), Budgets(1 << 20, 120.0, 1_800.0))


def test_the_command_line_refuses_an_over_budget_carrier_before_any_work(stored, monkeypatch):
    monkeypatch.setattr(cli, "extract_carrier", refuse_work)
    monkeypatch.setenv(SECONDS_ENV, "1")
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["carrier", stored, "--search-length", str(MAX_EVAL_LENGTH)], stdout=out, stderr=err) == 2
    assert err.getvalue().count("\n") == 1 and out.getvalue() == ""
    assert "this carrier extraction would take" in err.getvalue() and SECONDS_ENV in err.getvalue()
    assert "shorter near-recurrence search" in err.getvalue()


def test_the_command_line_refuses_an_over_budget_prediction_before_any_work(stored, monkeypatch):
    """One sample per length: the evaluation fits in a second, the prediction to 2^20 does not."""
    monkeypatch.setattr(measure, "evaluate", refuse_work)  # where evaluate's work is done (lengen_core.measure)
    monkeypatch.setattr(measure, "predict_at", refuse_work)
    monkeypatch.setenv(SECONDS_ENV, "1")
    out, err = io.StringIO(), io.StringIO()
    lengths = ",".join(map(str, DOUBLINGS))
    assert cli.main(["evaluate", stored, "--lengths", lengths, "--samples", "1", "--predict"], stdout=out,
                    stderr=err) == 2
    assert "this prediction would take" in err.getvalue() and SECONDS_ENV in err.getvalue()
    assert "fewer lengths" in err.getvalue() and out.getvalue() == ""


def test_the_checks_pass_what_fits(monkeypatch):
    monkeypatch.setenv(SECONDS_ENV, "120")
    assert check_carrier(RunConfig(), 1 << 16).seconds < 120
    assert check_prediction(RunConfig(), DOUBLINGS[:5]).memory_bytes < 3_072 << 20


MEASURE = textwrap.dedent(
    """
    import json, re, sys, time
    from lengen.runtime import limit_heap_growth
    limit_heap_growth()
    def peak():  # this process's own high-water mark (ru_maxrss keeps the parent's across exec on Linux)
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
    from lengen_core.analysis.carrier import extract_carrier
    from lengen_core.config import RunConfig, with_changes
    from lengen_core.analysis.dilution import predict
    from lengen_core.models.initial import initial_model
    kind, vocab, width, encoding, longest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    config = with_changes(RunConfig(), vocab_size=vocab, d_model=width, encoding=encoding)
    model = initial_model(config).eval().requires_grad_(False)
    start = time.perf_counter()
    if kind == "carrier":
        extract_carrier(model, config, search_length=longest)
    else:
        predict(model, config, [n for n in (16 << p for p in range(21)) if n <= longest])
    print(json.dumps({"peak": peak(), "seconds": time.perf_counter() - start}))
    """
)


@pytest.mark.slow
@pytest.mark.serial  # measures a peak memory
@pytest.mark.parametrize(("kind", "vocab", "width", "encoding", "longest"),
                         [("carrier", 64, 256, "rope", 1 << 17), ("prediction", 32, 128, "learned", 4_096)])
def test_the_memory_estimates_cover_the_measured_peak(kind, vocab, width, encoding, longest):
    """In a fresh process: the estimate is above the peak resident memory and within 3× of it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", MEASURE, kind, str(vocab), str(width), encoding, str(longest)],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.splitlines()[-1])["peak"]
    config = with_changes(RunConfig(), vocab_size=vocab, d_model=width, encoding=encoding)
    lengths = [n for n in (16 << p for p in range(21)) if n <= longest]
    estimate = (carrier_cost(config, longest) if kind == "carrier" else prediction_cost(config, lengths)).memory_bytes
    assert measured <= estimate <= 3 * measured, (measured / 2**20, estimate / 2**20)

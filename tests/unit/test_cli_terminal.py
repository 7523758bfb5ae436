"""The command line is a researcher's own tool (lengen.console): it says what a command will
cost and runs it, the server's budgets only where asked for (`--budget` or a budget variable), progress
on stderr unless a script reads `--json`, and Ctrl-C ends it with status 130, keeping what was finished.

Work here is small and fast; the budgets' rates are lowered so that it is priced as a server would refuse
it, which is the policy under test (the estimates themselves are tested in tests/unit/test_budget.py)."""

from __future__ import annotations

import io
import json
import re
import time

import pytest

from lengen import budget, cli
from lengen.budget import BUDGET_ENVS, SECONDS_ENV, TRAIN_SECONDS_ENV, BudgetError
from lengen.console import SAY_AFTER_SECONDS, Console
from lengen.store import TEMP_PREFIX, RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training
from tests.helpers.cli import ok_json, run_cli, strict_json

QUICK = ("--steps", "30", "--device", "cpu")
SMALL = with_changes(RunConfig(), steps=30)


@pytest.fixture(autouse=True)
def home_without_budget_variables(tmp_path, monkeypatch):
    """An empty run store of its own, and no budget set in the environment (a person's terminal)."""
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    for name in BUDGET_ENVS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def slow_rates(monkeypatch):
    """Every estimate 10^5 times longer: a server refuses all of it."""
    monkeypatch.setattr(budget, "FLOPS_PER_SECOND", budget.FLOPS_PER_SECOND / 1e5)
    monkeypatch.setattr(budget, "FLOATS_PER_SECOND", budget.FLOATS_PER_SECOND / 1e5)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_runs_what_the_server_refuses_and_says_what_it_costs(slow_rates) -> None:
    trained = run_cli("train", *QUICK)
    assert trained.code == 0, trained.stderr
    first = trained.stderr.splitlines()[0]
    assert first.startswith("lengen: estimate: this training: about") and "no limit at a terminal" in first
    with pytest.raises(BudgetError, match=TRAIN_SECONDS_ENV):  # the served app prices it the same way, and refuses
        budget.check_training(SMALL)
    run_id = RunStore().list_runs()[0].run_id
    carrier = run_cli("carrier", run_id, "--search-length", "256", "--json")
    assert carrier.code == 0, carrier.stderr
    with pytest.raises(BudgetError, match=SECONDS_ENV) as refused:
        budget.check_carrier(SMALL, 256)
    assert f"the operator raises {SECONDS_ENV}" in str(refused.value)  # the server's refusal says who lifts it


@pytest.mark.parametrize("opt_in", ["flag", "variable"])
def test_the_flag_or_a_budget_variable_applies_the_servers_limits_and_says_how_to_lift_them(
        slow_rates, monkeypatch, opt_in) -> None:
    if opt_in == "variable":
        monkeypatch.setenv(TRAIN_SECONDS_ENV, "60")
    refused = run_cli("train", *QUICK, *(["--budget"] if opt_in == "flag" else []))
    assert refused.code == 2 and refused.stdout == ""
    message = refused.stderr
    assert message.startswith("lengen: error: this training would take about") and message.count("\n") == 1
    assert f"or raise {TRAIN_SECONDS_ENV}, or run without --budget" in message
    assert (f"with {TRAIN_SECONDS_ENV} unset" in message) == (opt_in == "variable")
    assert RunStore().list_runs() == []  # refused before any work


def test_progress_on_stderr_and_silence_for_a_script_reading_json() -> None:
    shown = run_cli("train", *QUICK)
    assert shown.code == 0
    assert "training" in shown.stderr and "30/30" in shown.stderr, shown.stderr  # every step counted
    assert ok_json("train", *QUICK, "--seed", "1", "--json")  # ok_json: stderr empty
    out, terminal = io.StringIO(), Terminal()  # --json at a terminal: the person still sees the progress
    assert cli.main(["train", *QUICK, "--seed", "2", "--json"], stdout=out, stderr=terminal) == 0
    assert "30/30" in terminal.getvalue() and "lengen: estimate:" in terminal.getvalue()


def test_the_training_bar_ends_at_the_step_an_early_stop_ended_it() -> None:
    """The default run learns its task in a few hundred of its 1,500 steps and stops early: the bar's last frame is
    full at that step (it stayed at "18% ... <01:16" before), and says it stopped early."""
    out, terminal = io.StringIO(), Terminal()
    assert cli.main(["train", "--device", "cpu", "--patience", "20", "--json"], stdout=out, stderr=terminal) == 0
    result = strict_json(out.getvalue())
    steps = result["steps"]
    assert result["stopped_early"] and steps < RunConfig().train.steps
    last = terminal.getvalue().rstrip().rsplit("\r", 1)[-1]
    assert f"{steps}/{steps}" in last and "100%" in last, last
    assert f"stopped early at step {steps:,} of {RunConfig().train.steps:,}" in last, last


def test_work_that_reports_no_steps_shows_its_time_against_the_estimate() -> None:
    stream = io.StringIO()
    console = Console(stream, limited=False, quiet=False)
    with console.estimated("extracting the carrier", 3.0):
        time.sleep(1.2)
    text = stream.getvalue()
    assert "extracting the carrier (estimated 3.0 s)" in text and text.rstrip().rsplit("\r", 1)[-1].count("100%") == 1
    quiet = Console(io.StringIO(), limited=False, quiet=True)
    with quiet.estimated("extracting the carrier", 3.0):
        pass
    assert quiet.stderr.getvalue() == ""


def test_ctrl_c_ends_with_130_and_leaves_no_half_written_run(monkeypatch) -> None:
    step = Training.step

    def interrupted(self):
        if self.steps_done == 10:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(Training, "step", interrupted)
    outcome = run_cli("train", *QUICK)
    assert outcome.code == cli.INTERRUPTED == 130
    assert "interrupted (Ctrl-C)" in outcome.stderr.splitlines()[-1] and "Traceback" not in outcome.stderr
    store = RunStore()
    assert store.list_runs() == []


def test_ctrl_c_while_a_run_is_written_leaves_no_tmp_folder(monkeypatch) -> None:
    from lengen import store as store_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_module, "_write_run", interrupted)
    outcome = run_cli("train", *QUICK)
    assert outcome.code == 130
    runs = RunStore().runs_dir
    assert not [p for p in runs.iterdir() if p.name.startswith(TEMP_PREFIX)] if runs.exists() else True


@pytest.mark.slow  # a 4 s search on one thread
def test_a_carrier_extraction_the_server_refuses_runs_at_a_terminal_with_real_progress(monkeypatch) -> None:
    """Honest rates: a RoPE search to 2^20 is priced at about 9 s (V² × d_model × offsets, one thread), over a
    server limit of 1 s, and it really takes longer than that: its search is made to run to its end (no
    offset near enough), the most the weights can make it take. The server's pricer refuses it, naming the
    variable and who lifts it; the terminal says the same estimate, runs it and shows a bar counting the
    extraction's own parts (not time): the run, its initialisations and each chunk of searched offsets."""
    import math

    from lengen_core.analysis import carrier

    trained = run_cli("train", *QUICK)
    assert trained.code == 0, trained.stderr
    run_id = RunStore().list_runs()[0].run_id
    search, limit = 1 << 20, 1
    seconds = budget.carrier_cost(SMALL, search).seconds
    assert 4 * limit < seconds < 20.0
    monkeypatch.setenv(SECONDS_ENV, str(limit))
    with pytest.raises(BudgetError, match=SECONDS_ENV) as refused:
        budget.SERVER.check_carrier(SMALL, search)
    assert f"the operator raises {SECONDS_ENV}" in str(refused.value)
    monkeypatch.delenv(SECONDS_ENV)
    found = carrier.find_near_recurrences
    monkeypatch.setattr(carrier, "find_near_recurrences", lambda *args, **kwargs: found(*args, **{**kwargs, "gap": -math.inf}))
    stderr = Terminal()
    started = time.process_time()
    assert cli.main(["carrier", run_id, "--search-length", str(search)], stdout=io.StringIO(), stderr=stderr) == 0
    assert time.process_time() - started > limit  # really over the server's limit, not only priced over it
    text = stderr.getvalue()
    assert text.startswith("lengen: estimate: this carrier extraction: about") and "no limit at a terminal" in text
    assert "extracting the carrier (estimated" in text
    parts = 1 + budget.BASELINE_SEEDS + carrier.search_chunks(SMALL, search)  # the run, its initialisations, 64 chunks
    assert parts == 73 and f"{parts}/{parts}" in text.rsplit("\r", 1)[-1]
    shown = {int(n) for n in re.findall(r"(\d+)/73", text)}
    assert len({n for n in shown if 10 < n < 73}) >= 5  # the bar moves with the search, chunk by chunk


def test_a_search_that_ends_early_fills_the_bar(monkeypatch) -> None:
    """An untrained-like run ends its search at the 50th near-recurrence, in its first chunk: the bar ends full."""
    trained = run_cli("train", *QUICK)
    assert trained.code == 0, trained.stderr
    run_id = RunStore().list_runs()[0].run_id
    stderr = Terminal()
    assert cli.main(["carrier", run_id, "--search-length", str(1 << 18)], stdout=io.StringIO(), stderr=stderr) == 0
    assert "(at most: the search ends at its 50th near-recurrence)" in stderr.getvalue().splitlines()[0]
    parts = 1 + budget.BASELINE_SEEDS + 16
    assert f"{parts}/{parts}" in stderr.getvalue().rsplit("\r", 1)[-1]


def test_the_horizon_search_has_a_bar_of_its_own_and_the_answer_measure_gives(slow_rates, monkeypatch) -> None:
    """`evaluate --horizon` at a terminal: the estimate line names the search, the search shows its own bar after the
    evaluation's (it reports no steps: its time against its estimate), and the horizon is the one `measure` finds
    when it searches itself. The rates are slowed so that every part is priced long enough for a bar."""
    from lengen_core.measure import measure

    trained = run_cli("train", *QUICK)
    assert trained.code == 0, trained.stderr
    run_id = RunStore().list_runs()[0].run_id
    out, stderr = io.StringIO(), Terminal()
    search = cli.search_predicted_horizon

    def searched_slowly(*args, **options):  # a tiny head's search can end before a bar is due (SAY_AFTER_SECONDS)
        time.sleep(3 * SAY_AFTER_SECONDS)
        return search(*args, **options)

    monkeypatch.setattr(cli, "search_predicted_horizon", searched_slowly)
    assert cli.main(["evaluate", run_id, "--lengths", "16,64", "--samples", "32", "--horizon", "--json"],
                    stdout=out, stderr=stderr) == 0
    text = stderr.getvalue()
    assert "this horizon search: about" in text.splitlines()[0], text
    assert text.index("evaluating (estimated") < text.index("searching the predicted horizon (estimated"), text
    result = json.loads(out.getvalue())
    searched = measure(RunStore().load(run_id), [16, 64], 32, search=True)
    assert result["predicted_horizon"] == searched.predicted_horizon.length
    assert result["predicted_horizon_below"] == searched.predicted_horizon.below
    assert result["predicted_horizon_note"] == searched.horizon_note

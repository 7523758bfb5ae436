"""The delay tasks (issue 30 §1): the delays setting and its bounds, the sequences, accuracy against the
delay, the verdict, links, the command line and transfer. One trained run (a RoPE head on delay-copy,
about a second) is shared by the module; the claims over encodings and seeds are test_delay_claims.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lengen.share import config_from_query, config_to_query
from lengen.store import RunStore
from lengen_core.analysis.delays import check_delays, delay_curve
from lengen_core.claims import DELAY_HOLDS, delay_expectation, delay_outcome
from lengen_core.config import ConfigError, RunConfig, format_delays, parse_delays, with_changes
from lengen_core.tasks import content_vocab, delay_tokens, sample_batch, training_delays
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.training import train
from lengen_core.transfer import transfer
from tests.helpers.cli import assert_user_error, ok_json, run_cli

BASE = with_changes(RunConfig(), task="delay-copy", delays="2-8", train_length=24, vocab_size=12, d_model=64,
                    steps=600, seed=5)


@pytest.fixture(scope="module")
def delay_run():
    torch.set_num_threads(1)
    return train(BASE, "cpu")


# --- the setting ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "delays", "canonical"), [
    ("2-8", (2, 3, 4, 5, 6, 7, 8), "2-8"), ("2,4,8", (2, 4, 8), "2,4,8"), (" 2 - 4 , 8,3", (2, 3, 4, 8), "2-4,8"),
    ("5", (5,), "5"), ("", (), ""),
])
def test_a_delays_spec_reads_as_its_delays_and_back(spec, delays, canonical) -> None:
    assert parse_delays(spec) == delays
    assert format_delays(delays) == canonical


@pytest.mark.parametrize(("changes", "fragments"), [
    ({"delays": "8-2"}, ("runs backwards", "2-8")),
    ({"delays": "0-4"}, ("each delay must be 1 to",)),
    ({"delays": "2-40"}, ("longest delay 40", "training length 24")),
    ({"delays": "two"}, ("'two' is not a delay", "2-8")),
    ({"delays": ""}, ("needs its training delays", "2-8")),
    ({"length_mode": "sampled"}, ("length mode must be fixed",)),
    ({"vocab_size": 2}, ("vocab size ≥ 3", "filler")),
    ({"task": "selective-copy", "vocab_size": 11}, ("even vocab size", "marked copies")),
    ({"task": "retrieval"}, ("delays apply to the delay-copy and selective-copy tasks only",)),
    ({"delays": 5}, ("must be text",)),
])
def test_bad_delays_say_what_is_allowed(changes, fragments) -> None:
    with pytest.raises(ConfigError) as error:
        with_changes(BASE, **changes)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_existing_run_ids_are_unchanged_and_a_stored_config_without_delays_reads() -> None:
    assert RunConfig().run_id() == "rope-softmax-retrieval-s0-bc1b0b2bb01a"
    assert with_changes(RunConfig(), task="shift", offset=5).run_id() == "rope-softmax-shift-s0-288275b807d5"
    old = RunConfig().to_dict()
    del old["task"]["delays"]
    assert RunConfig.from_stored(old) == RunConfig()
    assert BASE.run_id().startswith("rope-softmax-delay-copy-s5-")
    assert with_changes(BASE, delays="2-9").run_id() != BASE.run_id()


def test_a_link_carries_the_task_and_its_delays() -> None:
    config = with_changes(BASE, task="selective-copy", delays="2-4,9")
    query = config_to_query(config)
    assert query["task"] == "selective-copy" and query["delays"] == "2-4,9"
    assert config_from_query(query) == config
    assert "delays" not in config_to_query(RunConfig())  # a retrieval link stays as it was
    with pytest.raises(ConfigError, match="runs backwards"):
        config_from_query({**query, "delays": "9-2"})


# --- the sequences ----------------------------------------------------------------------------------------


def test_delay_copy_puts_d_fillers_after_the_source() -> None:
    task = BASE.task
    delays = torch.tensor([1, 2, 8, 23])
    tokens, answers = delay_tokens(task, delays, torch.Generator().manual_seed(0))
    L, filler = task.train_length, task.vocab_size - 1
    assert tokens.shape == (4, L) and answers.shape == (4, 1)
    for row, d in enumerate(delays.tolist()):
        assert (tokens[row, L - d:] == filler).all()  # the silence, the query among it
        assert (tokens[row, : L - d] < filler).all()  # content up to and including the source
        assert tokens[row, L - 1 - d] == answers[row, 0]
    assert content_vocab(task) == task.vocab_size - 1


def test_selective_copy_marks_the_source_and_nothing_else() -> None:
    task = with_changes(BASE, task="selective-copy").task
    half, L = task.vocab_size // 2, task.train_length
    delays = torch.tensor([1, 5, 23])
    tokens, answers = delay_tokens(task, delays, torch.Generator().manual_seed(1))
    for row, d in enumerate(delays.tolist()):
        marked = (tokens[row] >= half).nonzero().flatten().tolist()
        assert marked == [L - 1 - d]
        assert tokens[row, L - 1 - d] - half == answers[row, 0]
    assert content_vocab(task) == half


def test_training_draws_each_sequence_a_delay_from_the_set() -> None:
    generator = torch.Generator().manual_seed(2)
    drawn = training_delays(with_changes(BASE, delays="2,5,9").task, 4_000, generator)
    assert set(drawn.tolist()) == {2, 5, 9}
    tokens, answers = sample_batch(BASE.task, 64, generator)
    assert tokens.shape == (64, BASE.task.train_length) and answers.shape == (64, 1)


# --- accuracy against the delay, the verdict -------------------------------------------------------------


def test_a_rope_head_learns_its_delays_and_its_kernel_peaks_there(delay_run) -> None:
    curve = delay_curve(delay_run.model, BASE, samples=128)
    assert [p.delay for p in curve.points] == list(range(1, 24))
    assert {p.delay for p in curve.seen()} == set(range(2, 9))
    assert curve.mean_accuracy(True) >= ACCURACY_BAR
    far = [p for p in curve.unseen() if p.delay >= 12]
    assert sum(p.accuracy for p in far) / len(far) < 0.4  # measured ≈ 0.1 (chance 1/11)
    seen_mass = sum(p.source_mass for p in curve.seen()) / len(curve.seen())
    assert seen_mass > 0.5 and max(p.source_mass for p in far) < seen_mass / 2
    assert all(p.source_margin > 0 for p in curve.seen()) and all(p.source_margin < 0 for p in far)
    assert delay_outcome(True, curve.mean_accuracy(False), curve.chance) == "drops" == delay_expectation(
        "delay-copy", "rope")
    assert curve.chance == pytest.approx(1 / 11)


def test_the_verdict_of_a_delay_run_reads_its_delays(delay_run) -> None:
    verdict = delay_run.verdict
    assert verdict.learned and verdict.beyond_length is None and verdict.at_chance_beyond is None
    assert "training delays 2-8" in verdict.reason
    assert verdict.chance == pytest.approx(1 / 11)


def test_the_same_request_gives_the_same_numbers(delay_run) -> None:
    one = delay_curve(delay_run.model, BASE, "3,12", samples=64, seed=7)
    two = delay_curve(delay_run.model, BASE, (12, 3), samples=64, seed=7)
    assert one == two


@pytest.mark.parametrize(("delays", "samples", "fragment"), [
    ("24", 16, "a delay is 1 to 23"), ("", 16, "at least one delay"), ("2", 0, "samples 0"),
    ("1-23", 4_096, "more than one request may read"),
])
def test_a_bad_delay_request_says_what_is_allowed(delays, samples, fragment) -> None:
    with pytest.raises(ConfigError, match=fragment):
        check_delays(BASE, delays, samples)


def test_a_retrieval_run_has_no_delays_to_read() -> None:
    with pytest.raises(ConfigError, match="needs a run of the delay-copy or selective-copy task"):
        check_delays(RunConfig(), "2", 8)


def test_holds_and_drops_are_told_apart_by_the_claims_threshold() -> None:
    assert delay_outcome(True, DELAY_HOLDS, 0.1) == "holds"
    assert delay_outcome(True, DELAY_HOLDS - 0.01, 0.1) == "drops"
    assert delay_outcome(False, 1.0, 0.1) == "unlearned"
    assert delay_expectation("delay-copy", "rope", attention="linear") is None


# --- the command line -------------------------------------------------------------------------------------


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    return tmp_path


def test_cli_evaluates_a_delay_run_against_the_delay(home: Path, delay_run) -> None:
    RunStore().save(delay_run)
    result = ok_json("evaluate", delay_run.run_id, "--delays", "8-10", "--samples", "64", "--device", "cpu", "--json")
    assert [(p["delay"], p["seen"]) for p in result["points"]] == [(8, True), (9, False), (10, False)]
    assert result["run_delays"] == [2, 3, 4, 5, 6, 7, 8] and result["samples"] == 64
    assert result["points"][0]["accuracy"] >= ACCURACY_BAR
    readable = run_cli("evaluate", delay_run.run_id, "--delays", "9", "--samples", "32", "--device", "cpu")
    assert readable.code == 0 and "mean accuracy: seen —, unseen" in readable.stdout
    assert_user_error(run_cli("evaluate", delay_run.run_id, "--lengths", "48"), "--lengths", "do not apply")
    assert_user_error(run_cli("evaluate", delay_run.run_id, "--delays", "30"), "a delay is 1 to 23")


def test_cli_train_refuses_a_delay_task_without_delays(home: Path) -> None:
    assert_user_error(run_cli("train", "--task", "delay-copy"), "needs its training delays", "2-8")
    assert_user_error(run_cli("train", "--delays", "2-8"), "leave delays empty")


def test_cli_refuses_delays_for_a_retrieval_run(home: Path, trained) -> None:
    run = trained(steps=5)
    RunStore().save(run)
    assert_user_error(run_cli("evaluate", run.run_id, "--delays", "2"), "--delays reads a run of", "--lengths")


@pytest.mark.slow  # three trainings (≈ 5 s)
def test_training_on_neighbouring_delays_first_speeds_a_rope_head_up(home: Path) -> None:
    """Measured (3 seeds, L 32): delays 9-16 learned in 47-73 steps from scratch and 10-22 after 2-8."""
    config = with_changes(BASE, delays="9-16", train_length=32, steps=800, seed=11)
    result = transfer(config, "2-8")
    assert result.steps_from_scratch is not None and result.steps_from_pretrained is not None
    assert result.steps_from_pretrained < result.steps_from_scratch and result.speedup > 1
    cli = ok_json("transfer", "--task", "delay-copy", "--delays", "9-16", "--before", "2-8", "--train-length", "32",
                  "--vocab", "12", "--d-model", "64", "--steps", "800", "--seed", "11", "--device", "cpu", "--json")
    assert cli["steps_from_scratch"] == result.steps_from_scratch
    assert cli["steps_from_pretrained"] == result.steps_from_pretrained


# --- data diversity: the sweep's delay sets ---------------------------------------------------------------


def test_a_grid_without_delay_sets_keeps_its_id_and_delay_sets_need_a_delay_task() -> None:
    from lengen.sweep import SweepError, SweepGrid

    assert SweepGrid().sweep_id() == "sweep-d75ec7d716fe"  # the id before the axis existed
    grid = SweepGrid(delay_sets=("2", "2-8"), base=(("task", "delay-copy"),))
    assert [cell["delays"] for cell in grid.cells()] == ["2", "2-8"] and grid.sweep_id() != SweepGrid().sweep_id()
    with pytest.raises(SweepError, match="need a delay task in the base"):
        SweepGrid(delay_sets=("2-8",))
    with pytest.raises(SweepError, match="needs its delay sets"):
        SweepGrid(base=(("task", "delay-copy"),))
    with pytest.raises(SweepError, match="runs backwards"):
        SweepGrid(delay_sets=("8-2",), base=(("task", "delay-copy"),))


def test_a_delay_cell_is_read_against_the_delay(delay_run) -> None:
    from lengen.sweep import measure_run

    record = measure_run(delay_run, [24, 48], 64)
    assert record["lengths"] == [] and record["delay_count"] == 7 and record["learned"]
    assert record["mean_seen"] >= ACCURACY_BAR and record["mean_unseen"] < record["mean_near_unseen"]


def test_the_shipped_diversity_sweep_is_complete() -> None:
    from lengen.presets import DIVERSITY_GRID, PRESET_ROOT
    from lengen.sweep import stored_sweep

    result = stored_sweep(DIVERSITY_GRID, PRESET_ROOT)
    assert result is not None and len(result.cells) == DIVERSITY_GRID.size
    assert all("error" not in cell and cell["mean_seen"] is not None for cell in result.cells)

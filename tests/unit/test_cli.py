"""The command line: `cli.main` in-process for speed, and once as a real `python -m lengen`.

Every test gets its own empty run store (`LENGEN_HOME` → `tmp_path`). Runs train for 30 steps
unless an assertion needs a trained head; only the carrier test trains to convergence.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from lengen import cli
from lengen.runtime import device_name
from lengen.store import PRESET_ROOT, RunStore, StoreError, preset_store
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.analysis.heads import PIN_SHARE, analyse_heads
from lengen_core.config import MAX_EVAL_LENGTH, MAX_STEPS, RunConfig
from lengen_core.tasks import targets_of
from lengen_core.training import Run, resolve_device, train
from tests.helpers.cli import assert_user_error, ok_json, run_cli, strict_json

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICK = ("--steps", "30", "--device", "cpu")  # cheap, and the same on a machine with a GPU
TRAIN_KEYS = {"run_id", "config", "device", "steps", "train_seconds", "loss", "train_accuracy"}
ROW_KEYS = {"length", "accuracy", "target_mass", "argmax_key", "predicted_accuracy", "predicted_target_mass"}
EVALUATION_SEED = cli.build_parser().parse_args(["evaluate", "any-run"]).seed  # the default --seed


def train_quick(*extra: str) -> dict[str, Any]:
    return ok_json("train", *QUICK, *extra, "--json")


def stored_ids() -> list[str]:
    """The person's runs (`runs` lists the read-only presets after them)."""
    return [run["run_id"] for run in ok_json("runs", "--json")["runs"] if not run["preset"]]


def assert_reports_the_training(result: dict[str, Any]) -> None:
    """Loss and train accuracy are those of the same config trained here (same seed, same CPU), and
    the accuracy is a count of hits among the last batch's supervised positions."""
    config = RunConfig.from_dict(result["config"])
    run = train(config, "cpu")
    assert (result["loss"], result["train_accuracy"]) == (run.loss, run.train_accuracy)
    task = config.task
    supervised = config.train.batch_size * (1 if task.task == "retrieval" else task.train_length - task.offset)
    hits = result["train_accuracy"] * supervised  # the mean was taken in float32
    assert hits == pytest.approx(round(hits), abs=1e-3)


@torch.no_grad()
def plain_last_query(run: Run, length: int, samples: int) -> tuple[float, float, int]:
    """Accuracy, mean attention weight on the target key and most common key of largest logit of the
    last query of the minimal head (softmax), from the full forward pass over the evaluation sequences."""
    offset, vocab_size = run.config.task.offset, run.config.task.vocab_size
    tokens = sequence_tokens(EVALUATION_SEED, length, samples, vocab_size)  # (S, L)
    readout = run.model(tokens, query_start=length - 1)[:, -1]  # (S, V)
    pattern = run.model.attend(tokens, query_start=length - 1)[0]
    logits, weights = pattern.logits[:, 0, -1], pattern.weights[:, 0, -1]  # (S, L) each
    target = length - 1 - offset
    accuracy = (readout.argmax(dim=-1) == tokens[:, target]).float().mean()
    return float(accuracy), float(weights[:, target].mean()), int(logits.argmax(dim=-1).mode().values)


@torch.no_grad()
def plain_sequence(run: Run, length: int, samples: int) -> tuple[torch.Tensor, float]:
    """Hits (S, L - k) of the supervised positions t ≥ k, and the largest mean attention weight on
    key t − k that any head gives those queries (the carrier head's), from one full forward pass."""
    task = run.config.task
    tokens = sequence_tokens(EVALUATION_SEED, length, samples, task.vocab_size)  # (S, L)
    hits = run.model(tokens, query_start=task.offset).argmax(dim=-1) == targets_of(task, tokens)  # (S, L - k)
    t = torch.arange(task.offset, length)
    queries = torch.arange(len(t))
    masses = []
    for pattern in run.model.attend(tokens, 0):
        weights = pattern.weights.abs()[:, :, t]  # (S, H, L - k, L)
        masses.append((weights[:, :, queries, t - task.offset] / weights.sum(dim=-1)).mean(dim=(0, 2)))
    return hits, float(torch.cat(masses).max())


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    return tmp_path


# --- train ------------------------------------------------------------------------------------


def test_train_json_prints_one_object_and_stores_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    result = train_quick("--seed", "3")

    assert TRAIN_KEYS <= set(result)
    config = RunConfig.from_dict(result["config"])
    assert result["run_id"] == config.run_id()
    assert config.train.steps == 30 and config.train.seed == 3
    assert result["device"] == "cpu"
    assert result["steps"] == 30  # 30 steps cannot hold the target accuracy for the 200-step patience
    assert result["reused"] is False and result["stopped_early"] is False
    assert result["train_seconds"] > 0
    assert math.isfinite(result["loss"]) and result["loss"] > 0
    assert_reports_the_training(result)
    assert result["train_accuracy"] >= 2 / config.task.vocab_size  # 30 steps learn: measured 19/128, chance 1/16
    assert stored_ids() == [result["run_id"]]
    listed = ok_json("runs", "--json")["runs"][0]
    assert listed["preset"] is False
    assert (listed["steps"], listed["seed"], listed["encoding"]) == (30, 3, "rope")
    assert capsys.readouterr() == ("", "")  # the command wrote only to the streams it was given


def test_identical_train_reuses_the_stored_run_without_training(monkeypatch: pytest.MonkeyPatch) -> None:
    first = train_quick()

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored run was trained again")

    monkeypatch.setattr(cli, "_train", no_training)
    second = train_quick()

    assert second["reused"] is True
    assert second["run_id"] == first["run_id"]
    for key in ("steps", "train_seconds", "loss", "train_accuracy", "config"):
        assert second[key] == first[key], key  # read back from the store, bit for bit
    assert stored_ids() == [first["run_id"]]


def test_retrain_trains_again_and_keeps_a_single_copy() -> None:
    first = train_quick()
    again = train_quick("--retrain")
    assert again["reused"] is False
    assert again["run_id"] == first["run_id"]
    assert again["loss"] == first["loss"]  # same seed, same CPU: the same training
    assert stored_ids() == [first["run_id"]]


def test_a_different_seed_is_a_different_run() -> None:
    first, other = train_quick("--seed", "0"), train_quick("--seed", "1")
    assert other["reused"] is False and other["run_id"] != first["run_id"]
    assert sorted(stored_ids()) == sorted([first["run_id"], other["run_id"]])


def test_json_flag_is_accepted_before_and_after_the_command() -> None:
    before = ok_json("--json", "train", *QUICK)
    after = ok_json("train", *QUICK, "--json")
    assert before["run_id"] == after["run_id"]
    assert (before["reused"], after["reused"]) == (False, True)
    assert ok_json("--json", "runs")["runs"] == ok_json("runs", "--json")["runs"]


def test_readable_train_output_names_the_run() -> None:
    outcome = run_cli("train", *QUICK)
    assert outcome.code == 0 and outcome.stderr.startswith("lengen: estimate: this training: about"), outcome.stderr
    run_id = stored_ids()[0]
    assert f"run_id: {run_id}" in outcome.stdout.splitlines()
    assert "reused: False" in outcome.stdout
    with pytest.raises(ValueError):
        json.loads(outcome.stdout)  # JSON only under --json


# --- evaluate ---------------------------------------------------------------------------------


def test_evaluate_json_reports_each_length_in_order() -> None:
    run_id = train_quick()["run_id"]
    outcome = run_cli("evaluate", run_id, "--lengths", "16,64,1024", "--samples", "64", "--predict", "--json")
    assert outcome.code == 0, outcome.stderr
    report = strict_json(outcome.stdout)

    assert report["run_id"] == run_id
    assert report["chance"] == pytest.approx(1 / 16)
    rows = report["lengths"]
    assert [row["length"] for row in rows] == [16, 64, 1024]
    run = RunStore().load(run_id)
    for row, prediction in zip(rows, predict(run.model, run.config, [16, 64, 1024]), strict=True):
        assert ROW_KEYS <= set(row)
        accuracy, target_mass, argmax_key = plain_last_query(run, row["length"], 64)
        assert (row["accuracy"] * 64) == pytest.approx(round(row["accuracy"] * 64))  # a count of 64 samples
        assert row["accuracy"] == pytest.approx(accuracy, abs=1 / 64), row  # at most one near-tie apart
        assert row["target_mass"] == pytest.approx(target_mass, rel=1e-4), row
        assert row["argmax_key"] == argmax_key, row
        predicted = (row["predicted_accuracy"], row["predicted_vote_accuracy"], row["predicted_target_mass"])
        assert predicted == (prediction.accuracy, prediction.vote_accuracy, prediction.target_mass)

    # 30 steps learn nothing (the last batch: 19 of 128): the verdict says so, and no law is fitted
    assert report["verdict"] == run.verdict.to_dict() and report["verdict"]["learned"] is False
    assert (report["fit"], report["fit_status"]) == (None, "not_learned")
    assert all(row["fitted_target_mass"] is None for row in rows)


def test_evaluate_computes_what_was_asked_and_no_more(monkeypatch) -> None:
    """Without --predict and --horizon a fresh run is evaluated only: no prediction from the weights, no
    horizon search (the reason says which flag asks for it); with them, both."""
    import lengen_core.measure as measure_module

    run_id = train_quick()["run_id"]
    calls, originals = [], (measure_module.predict_at, measure_module.predicted_horizon)
    monkeypatch.setattr(measure_module, "predict_at", lambda *a, **k: calls.append("predict") or [])
    monkeypatch.setattr(measure_module, "predicted_horizon", lambda *a, **k: calls.append("search"))
    report = ok_json("evaluate", run_id, "--lengths", "16,64", "--samples", "16", "--json")
    assert calls == []
    assert all(row["predicted_accuracy"] is None and row["accuracy"] is not None for row in report["lengths"])
    assert report["predicted_horizon"] is None and "--horizon" in report["predicted_horizon_reason"]
    assert report["prediction_status"] is None
    monkeypatch.setattr(measure_module, "predict_at", originals[0])
    monkeypatch.setattr(measure_module, "predicted_horizon", originals[1])
    asked = ok_json("evaluate", run_id, "--lengths", "16,64", "--samples", "16", "--predict", "--horizon", "--json")
    assert all(row["predicted_accuracy"] is not None for row in asked["lengths"])
    assert asked["predicted_horizon_reason"] is None or "--horizon" not in asked["predicted_horizon_reason"]
    assert [row["accuracy"] for row in asked["lengths"]] == [row["accuracy"] for row in report["lengths"]]


def test_evaluate_is_deterministic_and_keeps_an_unsorted_order() -> None:
    run_id = train_quick()["run_id"]
    argv = ("evaluate", run_id, "--lengths", "64,16,32", "--samples", "32", "--json")

    def without_timing(report: dict[str, Any]) -> dict[str, Any]:
        return {**report, "lengths": [{k: v for k, v in row.items() if k != "seconds"} for row in report["lengths"]]}

    first, second = ok_json(*argv), ok_json(*argv)
    assert [row["length"] for row in first["lengths"]] == [64, 16, 32]
    assert without_timing(first) == without_timing(second)


def test_readable_evaluate_output_is_a_table() -> None:
    run_id = train_quick()["run_id"]
    outcome = run_cli("evaluate", run_id, "--lengths", "16,64", "--samples", "32")
    assert outcome.code == 0 and outcome.stderr.startswith("lengen: estimate: this evaluation"), outcome.stderr
    lines = outcome.stdout.splitlines()
    assert lines[0].split() == ["length", "accuracy", "beyond", "vote", "predicted", "p", "p", "pred", "argmax", "rule"]
    assert [line.split()[-1] for line in lines[1:3]] == ["none", "none"]
    assert [line.split()[0] for line in lines[1:3]] == ["16", "64"]
    assert all(0 <= float(line.split()[3]) <= 1 for line in lines[1:3])  # the ideal vote readout's accuracy
    said = {line.partition(":")[0]: line.partition(":")[2].strip() for line in lines[3:]}
    assert said["measured horizon (accuracy ≥ 0.9 at the lengths asked)"]  # the horizons, as --json gives them
    assert said["predicted horizon"].startswith("not searched") and "--horizon searches it" in said["predicted horizon"]


# --- carrier ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_carrier_of_a_converged_rope_run_peaks_at_the_offset() -> None:
    trained = ok_json("train", "--device", "cpu", "--json")  # default config and steps: converges
    assert trained["train_accuracy"] == 1.0
    outcome = run_cli("carrier", trained["run_id"], "--search-length", "4096", "--json")
    assert outcome.code == 0, outcome.stderr
    carrier = strict_json(outcome.stdout)

    assert carrier["source"] == "analytic"
    assert carrier["offset"] == 3 and carrier["argmax_offset"] == 3
    assert carrier["alignment"] is True and carrier["margin"] >= 2.0  # measured 2.3 nats; 1 is needed
    assert carrier["baseline"]["alignment"] is False  # training put the peak at k
    # Concentrated in frequency (measured 14 active of 64 against 64 untrained); at d_model 128 with qk_init 0.1
    # not lower in effective rank (measured 20 against 19; at the old default, d_model 64: 8 against 16).
    assert carrier["active_frequencies"] * 2 <= carrier["baseline"]["active_frequencies"]
    assert carrier["toeplitz_fraction"] > 0.99  # RoPE logits depend on t - u alone …
    assert carrier["baseline"]["toeplitz_fraction"] > 0.9  # … trained or not: equivariance, not a rule
    assert len(carrier["spectrum"]) == 64  # one rotary frequency per pair of d_model 128
    assert all(set(line) == {"frequency", "amplitude"} and line["amplitude"] >= 0 for line in carrier["spectrum"])
    offsets = [r["offset"] for r in carrier["near_recurrences"]]
    assert offsets == sorted(offsets)
    assert all(16 <= offset < 4096 for offset in offsets)  # past the training range, within the search


# --- runs and delete --------------------------------------------------------------------------


def test_runs_on_an_empty_store_lists_the_presets_read_only(home: Path) -> None:
    result = ok_json("runs", "--json")
    presets = {s.run_id for s in preset_store().list_runs()}
    assert len(presets) >= 3
    assert (result["root"], result["preset_root"], result["corrupt"]) == (str(home), str(PRESET_ROOT), {})
    assert {r["run_id"] for r in result["runs"]} == presets and all(r["preset"] for r in result["runs"])
    outcome = run_cli("runs")
    assert outcome.code == 0
    assert outcome.stdout.count("(preset, read-only)") == len(presets)


@pytest.mark.slow  # evaluates, searches and reads a preset; the app tests and test_rules.py load presets quickly
def test_a_preset_id_opens_from_a_fresh_home_and_cannot_be_deleted(home: Path) -> None:
    """The ids the app shows for its presets work here: evaluate, carrier and heads read them from
    the shipped store; delete refuses and the preset stays; nothing is written to the person's store."""
    preset = next(s for s in preset_store().list_runs() if s.config.task.task == "retrieval"
                  and s.config.model.encoding == "rope" and s.config.model.attention == "softmax")
    result = ok_json("evaluate", preset.run_id, "--lengths", "16,64", "--samples", "64", "--json")
    assert result["run_id"] == preset.run_id and result["verdict"]["learned"]
    assert [row["length"] for row in result["lengths"]] == [16, 64]
    assert ok_json("carrier", preset.run_id, "--search-length", "256", "--json")["argmax_offset"] == preset.config.task.offset
    assert_user_error(run_cli("delete", preset.run_id), "read-only", preset.run_id)
    assert preset_store().exists(preset.run_id)
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    with pytest.raises(StoreError, match="read-only"):
        preset_store().save(preset_store().load(preset.run_id))


def test_train_help_lists_the_choices() -> None:
    text = cli.build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    for choices in ("{retrieval,shift,delay-copy,selective-copy}", "{rope,learned,sinusoidal,alibi,nope}", "{softmax,linear}",
                    "{fixed,sampled}", "{auto,cpu,cuda,mps}"):
        assert choices in text, choices


def test_delete_removes_the_run() -> None:
    run_id = train_quick()["run_id"]
    assert ok_json("delete", run_id, "--json") == {"deleted": run_id}
    assert stored_ids() == []
    assert_user_error(run_cli("evaluate", run_id), "no run named", run_id)
    assert_user_error(run_cli("delete", run_id), "no run named", run_id)
    assert train_quick()["reused"] is False  # the next identical train starts afresh


# --- bad input --------------------------------------------------------------------------------

BAD_TRAIN = {
    "offset at the training length": (("--offset", "20", "--train-length", "16"), ("offset 20", "training length 16")),
    "unknown encoding": (("--encoding", "xpos"), ("encoding", "'xpos'")),
    "non-numeric steps": (("--steps", "many"), ("--steps", "'many'")),
    "zero steps": (("--steps", "0"), ("steps 0 is allowed only for a constructed start", "at least 1 step")),
    "negative steps": (("--steps", "-1"), ("steps -1", "out of range")),
    "constructed rope": (("--init", "constructed"), ("init constructed", "encoding learned")),
    "continues a path": (("--continues", "../etc"), ("continues run must be a run id",)),
    "continues and constructed": (("--encoding", "learned", "--init", "constructed", "--continues", "abc"),
                                  ("init must be random",)),
    "steps over the limit": (("--steps", str(MAX_STEPS + 1)), (f"steps {MAX_STEPS + 1}", str(MAX_STEPS))),
    "huge steps": (("--steps", str(10**30)), ("out of range",)),
    "learning rate nan": (("--lr", "nan"), ("learning rate",)),
    "unknown device": (("--device", "tpu"), ("'tpu'",)),
}


@pytest.mark.parametrize("argv, fragments", BAD_TRAIN.values(), ids=BAD_TRAIN.keys())
def test_bad_train_input_is_one_line_and_exit_2(argv: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    assert_user_error(run_cli("train", "--steps", "30", *argv, "--json"), *fragments)
    assert stored_ids() == []  # nothing trained, nothing stored


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_requested_without_cuda_is_a_user_error() -> None:
    assert_user_error(run_cli("train", "--steps", "30", "--device", "cuda"), "'cuda'", "not available")
    assert stored_ids() == []


BAD_EVALUATE = {
    "lengths not numbers": (("--lengths", "abc"), ("lengths must be whole numbers", "'abc'")),
    "no lengths": (("--lengths", ","), ("at least one length",)),
    "length beyond 2^20": (("--lengths", f"16,{MAX_EVAL_LENGTH + 1}"), (str(MAX_EVAL_LENGTH + 1), str(MAX_EVAL_LENGTH))),
    "length at the offset": (("--lengths", "16,3"), ("length 3", "offset 3")),
    "zero samples": (("--samples", "0", "--lengths", "16"), ("samples 0",)),
    "samples not a number": (("--samples", "lots"), ("--samples", "'lots'")),
    "unknown device": (("--device", "tpu"), ("--device", "'tpu'")),
}


@pytest.mark.parametrize("argv, fragments", BAD_EVALUATE.values(), ids=BAD_EVALUATE.keys())
def test_bad_evaluate_input_is_one_line_and_exit_2(argv: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    run_id = train_quick()["run_id"]
    assert_user_error(run_cli("evaluate", run_id, *argv, "--json"), *fragments)


def test_learned_run_beyond_its_position_table_is_a_user_error_unless_by_default() -> None:
    run_id = train_quick("--encoding", "learned", "--max-positions", "64")["run_id"]
    assert ok_json("evaluate", run_id, "--lengths", "64", "--samples", "8", "--json")["lengths"][0]["length"] == 64
    assert_user_error(run_cli("evaluate", run_id, "--lengths", "100", "--json"), "length 100", "64")
    # by default, the app's request: the Dilution page's ladder, those lengths the table holds (4 = k + 1, 16 … 64)
    assert [row["length"] for row in ok_json("evaluate", run_id, "--json")["lengths"]] == [4, 16, 32, 64]


def test_bad_carrier_search_length_is_a_user_error() -> None:
    run_id = train_quick()["run_id"]
    assert_user_error(run_cli("carrier", run_id, "--search-length", "0"), "search length 0")
    assert_user_error(run_cli("carrier", run_id, "--search-length", str(MAX_EVAL_LENGTH + 1)), "out of range")


# --- the device ---------------------------------------------------------------------------------


def test_every_analysis_takes_a_device_and_says_which_it_used() -> None:
    trained = train_quick()
    assert (trained["device"], trained["device_name"]) == ("cpu", "cpu")
    run_id = trained["run_id"]
    here = str(resolve_device("auto"))  # the default: CUDA, then MPS, then the CPU
    for argv in (("evaluate", run_id, "--lengths", "16", "--samples", "8"), ("heads", run_id),
                 ("carrier", run_id, "--search-length", "64")):
        on_cpu = ok_json(*argv, "--device", "cpu", "--json")
        assert (on_cpu["device"], on_cpu["device_name"], on_cpu["trained_on"]) == ("cpu", "cpu", "cpu"), argv
        assert ok_json(*argv, "--json")["device"] == here, argv
        assert cli.build_parser().parse_args(list(argv)).device == "auto"
    readable = run_cli("evaluate", run_id, "--lengths", "16", "--samples", "8", "--device", "cpu")
    assert readable.stdout.splitlines()[-1] == "device: cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
@pytest.mark.parametrize("command", ["evaluate", "heads", "carrier"])
def test_an_analysis_on_a_device_this_machine_lacks_is_a_user_error(command: str) -> None:
    run_id = train_quick()["run_id"]
    assert_user_error(run_cli(command, run_id, "--device", "cuda", "--json"), "'cuda'", "not available")


def test_the_device_names_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert device_name("cuda") == "cuda (NVIDIA H200)"
    assert device_name("cpu") == "cpu"
    assert device_name("mps") == "Apple silicon (MPS)"


BAD_COMMAND = {
    "unknown run id": (("evaluate", "rope-softmax-retrieval-s0-000000000000"), ("no run named",)),
    "unknown run id for carrier": (("carrier", "nothing-here"), ("no run named",)),
    "path-like run id": (("evaluate", "../x"), ("invalid run id", "'../x'")),
    "path-like run id for carrier": (("carrier", "../x"), ("invalid run id",)),
    "path-like run id for delete": (("delete", "../x"), ("invalid run id",)),
    "absolute run id": (("delete", "/etc"), ("invalid run id",)),
    "missing subcommand": ((), ("required",)),
    "only --json": (("--json",), ("required",)),
    "unknown subcommand": (("fly",), ("invalid choice", "'fly'")),
    "missing run id": (("evaluate",), ("run_id",)),
    "unknown option": (("runs", "--colour"), ("unrecognized arguments", "--colour")),
}


@pytest.mark.parametrize("argv, fragments", BAD_COMMAND.values(), ids=BAD_COMMAND.keys())
def test_bad_command_is_one_line_and_exit_2(argv: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    assert_user_error(run_cli(*argv), *fragments)


def test_stray_argument_with_a_newline_still_gives_one_error_line() -> None:
    assert_user_error(run_cli("runs", "foo\nbar"), "unrecognized arguments")


# --- the real entry point ---------------------------------------------------------------------


def test_python_dash_m_entry_point_and_exit_codes(home: Path) -> None:
    env = {**os.environ, "LENGEN_HOME": str(home), "OMP_NUM_THREADS": "1"}  # tiny model: one thread is fastest

    def python_m(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "lengen", *argv]
        return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)

    trained = python_m("train", *QUICK, "--json")
    assert trained.returncode == 0, trained.stderr
    run_id = strict_json(trained.stdout)["run_id"]
    assert (home / "runs" / run_id).is_dir()  # stored where LENGEN_HOME points

    refused = python_m("evaluate", run_id, "--lengths", "abc")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("lengen: error: ")
    assert "Traceback" not in refused.stderr


# --- the shift task and the transformer (C8) --------------------------------------------------

SHIFT = ("--task", "shift", "--layers", "2", "--heads", "2")
HEAD_KEYS = {"layer", "head", "carrier", "argmax_offset", "toeplitz_fraction", "effective_rank", "target_weight",
             "is_carrier", "pinned_key", "pinned_share"}


@pytest.mark.slow  # the transformer evaluations below train theirs from the command line quickly
def test_train_a_shift_transformer() -> None:
    result = train_quick(*SHIFT)
    config = RunConfig.from_dict(result["config"])
    assert (config.task.task, config.model.n_layers, config.model.n_heads) == ("shift", 2, 2)
    assert result["run_id"] == config.run_id() and "-shift-" in result["run_id"]
    assert result["steps"] == 30 and result["reused"] is False
    assert math.isfinite(result["loss"])
    assert_reports_the_training(result)
    assert result["train_accuracy"] >= 0.95  # measured 1.000: 30 steps teach the transformer the shift
    assert stored_ids() == [result["run_id"]]


def test_evaluate_a_shift_run_reports_accuracy_beyond_the_training_length() -> None:
    run_id = train_quick(*SHIFT)["run_id"]
    report = ok_json("evaluate", run_id, "--lengths", "16,32,64", "--samples", "16", "--json")
    assert report["task"] == "shift" and report["chance"] == pytest.approx(1 / 16)
    run = RunStore().load(run_id)
    rows = report["lengths"]
    assert [row["length"] for row in rows] == [16, 32, 64]
    for row in rows:
        assert ROW_KEYS | {"accuracy_beyond", "accuracy_by_position"} <= set(row)
        assert row["predicted_accuracy"] is None and row["predicted_target_mass"] is None  # no closed form
        # against one plain forward pass: exact hits (the smallest readout margin, 1.2 logits at 64,
        # is far above any rounding), the carrier head's weight up to float sums over other blocks
        hits, target_mass = plain_sequence(run, row["length"], 16)
        assert row["accuracy"] == hits.sum().item() / hits.numel()
        assert row["target_mass"] == pytest.approx(target_mass, rel=1e-4)
        assert row["argmax_key"] == row["length"] - 1 - 3  # the carrier head's last query reads t − k
        by_position = row["accuracy_by_position"]
        assert [p["position"] for p in by_position] == list(range(3, row["length"]))
        assert [p["accuracy"] for p in by_position] == hits.float().mean(dim=0).tolist()
    assert rows[0]["accuracy_beyond"] is None  # nothing lies beyond the training length
    for row in rows[1:]:
        beyond = [p["accuracy"] for p in row["accuracy_by_position"] if p["position"] >= 16]
        assert row["accuracy_beyond"] == pytest.approx(sum(beyond) / len(beyond))

    table = run_cli("evaluate", run_id, "--lengths", "16,32", "--samples", "16")
    assert table.code == 0 and table.stderr.startswith("lengen: estimate: this evaluation"), table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["length", "accuracy", "beyond", "vote", "predicted", "p", "p", "pred", "argmax", "rule"]
    assert [line.split()[-1] for line in lines[1:3]] == ["none", "none"]
    assert lines[1].split()[0] == "16" and lines[1].split()[2] == "—"
    assert lines[2].split()[0] == "32" and lines[2].split()[2] != "—"
    assert lines[1].split()[3] == "—"  # no ideal vote readout: a transformer answers through its layers


def test_evaluate_a_shift_run_at_the_default_lengths() -> None:
    run_id = train_quick(*SHIFT)["run_id"]
    rows = ok_json("evaluate", run_id, "--samples", "8", "--json")["lengths"]
    assert [row["length"] for row in rows] == [16, 32, 64, 128, 256]  # 1× … 16× training


def test_heads_reports_every_layer_and_head() -> None:
    run_id = train_quick(*SHIFT)["run_id"]
    result = ok_json("heads", run_id, "--json")
    assert result["run_id"] == run_id
    heads = result["heads"]
    assert [(h["layer"], h["head"]) for h in heads] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    run = RunStore().load(run_id)
    for h, report in zip(heads, analyse_heads(run.model, run.config), strict=True):
        assert HEAD_KEYS <= set(h)
        assert len(h["carrier"]) == 16  # s(Δ) for Δ = 0 … L_train - 1
        assert h["carrier"] == [float(v) for v in report.carrier]  # what the core measures, unchanged
        for key in ("argmax_offset", "toeplitz_fraction", "effective_rank", "target_weight", "is_carrier"):
            assert h[key] == getattr(report, key), key
        # RoPE: logits depend on t − u, so no head singles out one key (pinned shares measured ≤ 0.04)
        assert h["pinned_key"] is None and h["pinned_share"] < PIN_SHARE, h
    assert result["carrier_heads"] == [[h["layer"], h["head"]] for h in heads if h["is_carrier"]]
    assert result["pinned_heads"] == [[h["layer"], h["head"]] for h in heads if h["pinned_key"] is not None]

    readable = run_cli("heads", run_id)
    assert readable.code == 0 and readable.stderr.startswith("lengen: estimate: this per-head analysis"), readable.stderr
    assert [line.split(":")[0] for line in readable.stdout.splitlines()] == [
        "layer 0 head 0", "layer 0 head 1", "layer 1 head 0", "layer 1 head 1", "device"]


def test_heads_of_the_minimal_model_is_one_head() -> None:
    run_id = train_quick()["run_id"]
    heads = ok_json("heads", run_id, "--json")["heads"]
    assert [(h["layer"], h["head"]) for h in heads] == [(0, 0)]


BAD_TRANSFORMER = {
    "heads not dividing d_model": (("--layers", "2", "--heads", "3"), ("d_model 128", "divisible", "heads (6)")),
    "heads without layers": (("--heads", "2"), ("layers 0", "one head")),
    "too many layers": (("--layers", "9"), ("layers 9", "out of range")),
    "unknown task": (("--task", "copy"), ("task", "'copy'")),
}


@pytest.mark.parametrize("argv, fragments", BAD_TRANSFORMER.values(), ids=BAD_TRANSFORMER.keys())
def test_bad_transformer_input_is_one_line_and_exit_2(argv: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    assert_user_error(run_cli("train", *QUICK, *argv, "--json"), *fragments)
    assert stored_ids() == []


@pytest.mark.parametrize("run_id, fragment", [("nothing-here", "no run named"), ("../x", "invalid run id")])
def test_heads_of_a_bad_run_id_is_a_user_error(run_id: str, fragment: str) -> None:
    assert_user_error(run_cli("heads", run_id, "--json"), fragment)


def test_evaluate_a_retrieval_transformer_at_the_default_lengths() -> None:
    run_id = train_quick("--layers", "1")["run_id"]
    rows = ok_json("evaluate", run_id, "--json")["lengths"]
    assert [row["length"] for row in rows] == [16, 32, 64, 128, 256]


BAD_SHIFT_EVALUATE = {
    "zero samples": (("--samples", "0"), ("samples 0",)),
    "samples over the limit": (("--samples", "5000"), ("samples 5000",)),
    "negative seed": (("--seed", "-5"), ("seed -5",)),
}


@pytest.mark.parametrize("argv, fragments", BAD_SHIFT_EVALUATE.values(), ids=BAD_SHIFT_EVALUATE.keys())
def test_bad_shift_evaluate_input_is_refused_like_for_retrieval(argv: tuple[str, ...], fragments: tuple[str, ...]):
    run_id = train_quick("--task", "shift")["run_id"]  # the minimal head on shift: evaluated by evaluate_sequence too
    assert_user_error(run_cli("evaluate", run_id, "--lengths", "16", *argv, "--json"), *fragments)


def test_a_zero_layer_shift_run_is_read_like_a_transformer_everywhere() -> None:
    """One definition of 'single head' (RunConfig.single_head): the 0-layer shift run answers at every
    position, so evaluate reads it with forward passes (rows by position, no closed-form prediction,
    no law), like its verdict does."""
    config = RunConfig.from_dict({"task": {"task": "shift"}, "model": {"n_layers": 0}})
    assert not config.single_head and RunConfig().single_head
    result = train_quick("--task", "shift", "--layers", "0")
    evaluated = ok_json("evaluate", result["run_id"], "--lengths", "16,32", "--samples", "16", "--json")
    assert evaluated["fit_status"] == "not_applicable"
    assert all(row["accuracy_by_position"] and row["predicted_accuracy"] is None for row in evaluated["lengths"])


def test_every_command_runs_under_the_apps_heap_thresholds(monkeypatch):
    """One heap policy for the app, its training processes and the command line (lengen.runtime):
    since the single head's evaluation reuses its buffers, the thresholds no longer slow it (they speed up the
    prediction), so no command is left out."""
    calls = []
    monkeypatch.setattr(cli, "limit_heap_growth", lambda: calls.append(1) or True)
    ok_json("runs", "--json")
    assert calls == [1]

"""The run store: round trips, atomic writes, safe ids, and damage reported rather than crashing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lengen import run_files
from lengen.store import (
    CONFIG_FILE,
    FORMAT,
    METRICS_FILE,
    WEIGHTS_FILE,
    RunStore,
    StoreError,
    check_run_id,
)
from lengen_core.config import RunConfig, with_changes
from lengen_core.tasks import sample_batch
from lengen_core.training import Run, train


@pytest.fixture(scope="module")
def run() -> Run:
    return train(with_changes(RunConfig(), steps=5), "cpu")


@pytest.fixture(scope="module")
def other_run() -> Run:
    return train(with_changes(RunConfig(), steps=5, seed=1, encoding="learned", max_positions=64), "cpu")


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path)


def _logits(run: Run) -> torch.Tensor:
    tokens, _ = sample_batch(run.config.task, 32, torch.Generator().manual_seed(123))
    with torch.no_grad():
        return run.model(tokens, query_start=tokens.shape[1] - 1)  # (B, 1, V)


def _temp_dirs(store: RunStore) -> list[str]:
    return [path.name for path in store.runs_dir.iterdir() if path.name.startswith(".tmp-")]


@pytest.mark.parametrize("fixture", ["run", "other_run"])
def test_round_trip_gives_identical_weights_outputs_and_metrics(store, fixture, request):
    original: Run = request.getfixturevalue(fixture)
    store.save(original)
    loaded = store.load(original.run_id)

    assert loaded.config == original.config
    saved, restored = original.model.state_dict(), loaded.model.state_dict()
    assert saved.keys() == restored.keys()
    assert all(torch.equal(saved[name], restored[name]) for name in saved)
    assert torch.equal(_logits(original), _logits(loaded))
    for name in ("steps", "train_seconds", "loss", "train_accuracy", "stopped_early", "history"):
        assert getattr(loaded, name) == getattr(original, name), name
    assert loaded.device == "cpu"
    assert not loaded.model.training


def test_files_on_disk_are_json_and_safetensors(store, run):
    directory = store.save(run)

    assert directory == store.runs_dir / run.run_id
    assert json.loads((directory / CONFIG_FILE).read_text()) == run.config.to_dict()
    metrics = json.loads((directory / METRICS_FILE).read_text())
    assert metrics["format"] == FORMAT
    assert metrics["steps"] == run.steps and metrics["device"] == "cpu"
    assert set(load_file(directory / WEIGHTS_FILE)) == set(run.model.state_dict())
    assert _temp_dirs(store) == []


def test_saving_twice_keeps_the_first_run(store, run):
    first = store.save(run)
    created = store.list_runs()[0].created
    second = store.save(run)

    assert first == second
    assert [summary.run_id for summary in store.list_runs()] == [run.run_id]
    assert store.list_runs()[0].created == created
    assert _temp_dirs(store) == []


def test_list_is_newest_first_and_delete_removes(store, run, other_run):
    store.save(run)
    store.save(other_run)

    summaries = store.list_runs()
    assert [summary.run_id for summary in summaries] == [other_run.run_id, run.run_id]
    assert summaries[0].config == other_run.config
    assert summaries[0].steps == other_run.steps
    assert summaries[0].train_accuracy == other_run.train_accuracy

    store.delete(other_run.run_id)
    assert not store.exists(other_run.run_id)
    assert [summary.run_id for summary in store.list_runs()] == [run.run_id]
    assert _temp_dirs(store) == []


def test_empty_store_lists_nothing(store):
    assert store.list_runs() == []
    assert store.corrupt_runs() == {}
    assert store.clean_partial() == []


def test_missing_run_is_a_clear_error(store):
    for action in (store.load, store.delete):
        with pytest.raises(StoreError, match=f"no run named absent-run in {store.root}"):
            action("absent-run")
    assert not store.exists("absent-run")


def test_find_loads_only_the_exact_config(store, run):
    assert store.find(run.config) is None
    store.save(run)

    found = store.find(run.config)
    assert found is not None and found.run_id == run.run_id
    assert store.find(with_changes(run.config, seed=7)) is None


@pytest.mark.parametrize(
    "bad_id",
    ["", "../etc", "..", "/abs", "a/b", "a\\b", "a..b", ".hidden", ".tmp-x", "Upper", "a b", "x\n",
     "é", "a" * 129, None, 3],
)
def test_invalid_ids_are_rejected_before_touching_the_filesystem(tmp_path, bad_id):
    store = RunStore(tmp_path / "root")
    for action in (check_run_id, store.run_dir, store.exists, store.load, store.delete):
        with pytest.raises(StoreError, match="invalid run id"):
            action(bad_id)
    assert not store.root.exists()


def test_crash_leftovers_are_not_runs_and_can_be_cleaned(store, run):
    # What a crash between writing and renaming leaves behind: a temp dir with partial files.
    leftover = store.runs_dir / ".tmp-xyz"
    leftover.mkdir(parents=True)
    (leftover / CONFIG_FILE).write_text(json.dumps(run.config.to_dict()))
    (leftover / WEIGHTS_FILE).write_bytes(b"\x00" * 10)

    assert store.list_runs() == [] and store.corrupt_runs() == {}
    assert store.clean_partial() == []  # too young: it could be a save in progress
    assert store.clean_partial(older_than_seconds=0) == [".tmp-xyz"]
    assert not leftover.exists()


def test_failed_save_leaves_nothing_behind(store, run, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(run_files, "write_json", fail)
    with pytest.raises(OSError, match="disk full"):
        store.save(run)
    assert store.list_runs() == [] and not store.exists(run.run_id)
    assert _temp_dirs(store) == []


def _damage_config(directory: Path) -> None:
    (directory / CONFIG_FILE).write_text("{not json")


def _truncate_weights(directory: Path) -> None:
    path = directory / WEIGHTS_FILE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _remove_weights(directory: Path) -> None:
    (directory / WEIGHTS_FILE).unlink()


def _bad_metrics(directory: Path) -> None:
    metrics = json.loads((directory / METRICS_FILE).read_text())
    del metrics["steps"]
    (directory / METRICS_FILE).write_text(json.dumps(metrics))


@pytest.mark.parametrize(
    ("damage", "culprit"),
    [
        (_damage_config, CONFIG_FILE),
        (_truncate_weights, WEIGHTS_FILE),
        (_remove_weights, WEIGHTS_FILE),
        (_bad_metrics, METRICS_FILE),
    ],
)
def test_damaged_run_is_skipped_reported_and_refused(store, run, other_run, damage, culprit):
    damage(store.save(run))
    store.save(other_run)

    assert [summary.run_id for summary in store.list_runs()] == [other_run.run_id]
    corrupt = store.corrupt_runs()
    assert list(corrupt) == [run.run_id]
    assert culprit in corrupt[run.run_id]
    with pytest.raises(StoreError, match=culprit):
        store.load(run.run_id)
    store.delete(run.run_id)  # the way out: a damaged run can still be removed
    assert store.corrupt_runs() == {}


def test_run_under_the_wrong_name_is_reported(store, run):
    directory = store.save(run)
    os.rename(directory, store.runs_dir / "renamed-run")

    assert store.list_runs() == []
    assert "describes run" in store.corrupt_runs()["renamed-run"]


def test_lengen_home_is_honoured(tmp_path, monkeypatch, run):
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path / "home"))
    store = RunStore()

    assert store.root == tmp_path / "home"
    assert store.save(run) == tmp_path / "home" / "runs" / run.run_id


def test_default_root_is_dot_lengen_in_home(monkeypatch, tmp_path):
    monkeypatch.delenv("LENGEN_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert RunStore().root == tmp_path / ".lengen"


@pytest.mark.gpu
def test_load_onto_cuda_matches_cpu(store, run):
    store.save(run)
    on_gpu = store.load(run.run_id, device="cuda")

    assert on_gpu.device.startswith("cuda")
    assert all(parameter.is_cuda for parameter in on_gpu.model.parameters())
    tokens, _ = sample_batch(run.config.task, 32, torch.Generator().manual_seed(123))
    with torch.no_grad():
        logits = on_gpu.model(tokens.cuda(), query_start=tokens.shape[1] - 1).cpu()  # (B, 1, V)
    torch.testing.assert_close(logits, _logits(run), rtol=1e-4, atol=1e-4)


def test_a_stored_run_is_readable_by_every_local_user(tmp_path):
    """The container's non-root user reads presets written by root; mkdtemp alone would give 0700."""
    store = RunStore(tmp_path)
    directory = store.save(train(with_changes(RunConfig(), steps=2), "cpu"))
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    for name in ("config.json", "metrics.json", "weights.safetensors"):
        assert stat.S_IMODE((directory / name).stat().st_mode) == 0o644


def test_a_learned_transformer_whose_blocks_share_the_table_round_trips(tmp_path):
    config = with_changes(RunConfig(), task="shift", encoding="learned", n_layers=2, n_heads=2, steps=2,
                          max_positions=64)
    run = train(config, "cpu")
    store = RunStore(tmp_path)
    store.save(run)
    loaded = store.load(run.run_id)
    assert torch.equal(loaded.model.encoding.table, run.model.encoding.table)
    assert loaded.model.blocks[1].encoding.table is loaded.model.encoding.table


def test_a_config_stored_before_qk_init_existed_reads_as_its_legacy_value_and_keeps_its_id():
    written_then = with_changes(RunConfig(), d_model=64, qk_init=1.0).to_dict()
    del written_then["model"]["qk_init"]  # config.json of a run stored before the setting existed
    stored = RunConfig.from_stored(written_then)
    assert stored.model.qk_init == 1.0 and stored.model.d_model == 64
    assert stored.run_id() == "rope-softmax-retrieval-s0-ce9f6b56985b"  # the RoPE preset's id before the switch
    requested = RunConfig.from_dict(written_then)  # the same dict as a new request: today's default
    assert requested.model.qk_init == RunConfig().model.qk_init == 0.1
    assert requested.run_id() != stored.run_id()
    assert RunConfig.from_stored(RunConfig().to_dict()) == RunConfig()  # a full record is read as it is
    for damaged in ("not a config", {"model": 3}, {"model": {"qk_init": "big"}}):
        with pytest.raises(ValueError):
            RunConfig.from_stored(damaged)


def test_the_store_reads_a_run_written_before_qk_init_existed(store):
    old = train(with_changes(RunConfig(), steps=5, d_model=64, qk_init=1.0), "cpu")
    store.save(old)
    path = store.run_dir(old.config.run_id()) / CONFIG_FILE
    record = json.loads(path.read_text())
    del record["model"]["qk_init"]
    path.write_text(json.dumps(record))
    assert store.load(old.config.run_id()).config == old.config
    assert [summary.run_id for summary in store.list_runs()] == [old.config.run_id()]
    assert store.corrupt_runs() == {}

"""The device a run was trained on is stored and shown as such, wherever the run is loaded later."""

from __future__ import annotations

import dataclasses
import io
import json

from lengen import cli
from lengen.store import METRICS_FILE, RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train

CONFIG = with_changes(RunConfig(), steps=2)


def test_a_gpu_trained_run_loaded_on_the_cpu_still_says_where_it_was_trained(tmp_path, monkeypatch):
    run = train(CONFIG, "cpu")
    assert (run.device, run.trained_on, run.training_device) == ("cpu", "cpu", "cpu")
    store = RunStore(tmp_path)
    store.save(dataclasses.replace(run, trained_on="cuda:0"))  # as a CUDA training would record it
    metrics = json.loads((store.run_dir(run.run_id) / METRICS_FILE).read_text())
    assert metrics["device"] == "cuda:0"
    loaded = store.load(run.run_id)
    assert (loaded.device, loaded.trained_on, loaded.training_device) == ("cpu", "cuda:0", "cuda:0")
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    out = io.StringIO()
    assert cli.main(["train", "--steps", "2", "--json"], stdout=out, stderr=io.StringIO()) == 0
    answer = json.loads(out.getvalue())
    assert answer["reused"] and answer["device"] == "cuda:0"

"""One device policy (issue 15): the app trains and analyses on `$LENGEN_DEVICE` (auto by default:
CUDA, then MPS, then the CPU), names the device it uses (the GPU's own name on CUDA), and the
analyses that sum forward passes keep working where the device has no float64 (Apple's MPS),
checked here by treating the CPU as such a device."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import torch

import lengen_core.analysis.carrier as carrier_module
import ui.training.pool
from lengen import cli
from lengen.runtime import CUBLAS_ENV, DEVICE_ENV, deterministic_cublas, device_name, device_setting
from lengen_core.analysis.carrier import mean_logit_matrix
from lengen_core.analysis.equivariance import pair_logits
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import resolve_device, train
from ui.runs import analysis_device


@pytest.fixture
def no_setting(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    return monkeypatch


def test_the_device_setting_is_auto_unless_the_operator_names_one(no_setting: pytest.MonkeyPatch) -> None:
    assert device_setting() == "auto"
    for text, expected in ((" CPU ", "cpu"), ("cuda", "cuda"), ("mps", "mps"), ("auto", "auto"), ("", "auto")):
        no_setting.setenv(DEVICE_ENV, text)
        assert device_setting() == expected
    no_setting.setenv(DEVICE_ENV, "gpu")
    with pytest.raises(ValueError, match="LENGEN_DEVICE='gpu' is not allowed: give one of auto, cpu, cuda, mps"):
        device_setting()


def test_the_app_analyses_on_the_setting(no_setting: pytest.MonkeyPatch) -> None:
    assert analysis_device() == str(resolve_device("auto"))
    no_setting.setenv(DEVICE_ENV, "cpu")
    assert analysis_device() == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_a_device_the_machine_lacks_is_an_error_naming_the_setting(no_setting: pytest.MonkeyPatch) -> None:
    no_setting.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(ValueError, match="'cuda' is not available on this machine.*set by LENGEN_DEVICE"):
        analysis_device()


def test_the_app_trains_on_the_setting_and_names_it(no_setting: pytest.MonkeyPatch) -> None:
    made = {}

    class Pool:
        def __init__(self, store, **options) -> None:
            made.update(options)
            self.device = options["device"]

    no_setting.setattr(ui.training.pool, "TrainingPool", Pool)
    ui.training.pool.training_pool.clear()
    try:
        assert ui.training.pool.training_pool().device == str(resolve_device("auto")) and made["isolate"]  # resolved
        ui.training.pool.training_pool.clear()
        no_setting.setenv(DEVICE_ENV, "cpu")
        assert ui.training.pool.training_pool().device == "cpu"
        assert ui.training.pool.training_device_name() == "cpu"
        if not torch.cuda.is_available():  # a device the machine lacks stops the pool, naming the setting
            ui.training.pool.training_pool.clear()
            no_setting.setenv(DEVICE_ENV, "cuda")
            with pytest.raises(ValueError, match="set by LENGEN_DEVICE"):
                ui.training.pool.training_pool()
    finally:
        ui.training.pool.training_pool.clear()


def test_a_device_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    assert device_name("cpu") == device_name(torch.device("cpu")) == "cpu"
    assert device_name("mps") == "Apple silicon (MPS)"
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert device_name("cuda") == "cuda (NVIDIA H200)" and device_name("cuda:1") == "cuda:1 (NVIDIA H200)"

    def no_driver(device=None):
        raise RuntimeError("Found no NVIDIA driver on your system")

    monkeypatch.setattr(torch.cuda, "get_device_name", no_driver)
    assert device_name("cuda:0") == "cuda:0"  # a run trained on a GPU, named where there is none


@pytest.mark.parametrize("encoding", ["learned", "alibi"])
def test_mean_logits_without_float64_on_the_device_match_the_float64_sums(monkeypatch, encoding: str) -> None:
    """Where the device has no float64 each batch is summed in float32 there, then added in float64
    on the CPU: the mean logit matrix (the measured carrier, the Toeplitz fraction) agrees to float32."""
    config = with_changes(RunConfig(), encoding=encoding, d_model=16, train_length=8, offset=2, steps=5,
                          max_positions=64)
    model = train(config, "cpu").model
    float64 = mean_logit_matrix(model, config, 8, samples=64)
    monkeypatch.setattr(carrier_module, "NO_FLOAT64", frozenset({"cpu"}))
    float32 = mean_logit_matrix(model, config, 8, samples=64)
    assert float32.dtype == np.float64
    np.testing.assert_allclose(float32, float64, rtol=1e-5, atol=1e-6)


def test_equivariance_logits_come_back_in_float64_on_the_cpu() -> None:
    config = with_changes(RunConfig(), d_model=16, train_length=8, offset=2, steps=2)
    logits = pair_logits(train(config, "cpu").model, 1_000, 997)
    assert logits.device.type == "cpu" and logits.dtype == torch.float64 and logits.shape == (1, 16, 16)


def test_cublas_gets_its_deterministic_workspace_unless_the_operator_set_one(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(CUBLAS_ENV, raising=False)
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    cli.main(["runs", "--json"], stdout=io.StringIO(), stderr=io.StringIO())  # the command line sets it at start
    assert os.environ[CUBLAS_ENV] == ":4096:8"
    monkeypatch.setenv(CUBLAS_ENV, ":16:8")
    deterministic_cublas()
    assert os.environ[CUBLAS_ENV] == ":16:8"

"""The constructed learned-position head (lengen_core.models.construct, C1's expressivity half): its logits
are the carrier of its docstring, it retrieves offset k far past the training length, while the same
config trained from a random start is at chance there; configs it cannot be built for are refused
before any work, by the config and the command line alike."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lengen_core.analysis.evaluate import evaluate, wilson_interval
from lengen_core.analysis.verdict import CHANCE_TOLERANCE
from lengen_core.config import ConfigError, RunConfig, with_changes
from lengen_core.frequencies import MIN_GAP, carrier_gap
from lengen_core.models.construct import amplitude, frequencies
from lengen_core.models.initial import initial_model
from lengen_core.training import Run, train
from tests.helpers.cli import assert_user_error, ok_json, run_cli

LEARNED = with_changes(RunConfig(), encoding="learned")  # the `learned` fixture's config
CONSTRUCTED = with_changes(LEARNED, init="constructed", steps=0)
SAMPLES = 512


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty run store of the test's own."""
    monkeypatch.setenv("LENGEN_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def constructed() -> Run:
    return train(CONSTRUCTED, "cpu")


def test_the_logit_is_the_carrier_at_t_minus_u_minus_k() -> None:
    """q_t·k_u/√C = A·Σ_j cos(ω_j (t − u − k)) for every token at every position pair, from a forward pass."""
    config = with_changes(CONSTRUCTED, max_positions=256)
    model = initial_model(config)
    tokens = torch.randint(16, (3, 200), generator=torch.Generator().manual_seed(1))
    logits = model.attend(tokens)[0].logits[:, 0]  # (B, T, T), masked above the diagonal
    m = (config.model.d_model - config.task.vocab_size) // 2
    t, u = torch.meshgrid(torch.arange(200), torch.arange(200), indexing="ij")
    delta = (t - u - config.task.offset).to(torch.float64)
    expected = amplitude(m, 1e4, 256) * torch.cos(delta[..., None] * frequencies(m, 1e4)).sum(-1)  # (T, T)
    causal = u <= t
    torch.testing.assert_close(logits[:, causal].double(), expected[causal].expand(3, -1), atol=2e-3, rtol=1e-5)


def test_the_amplitude_leaves_other_keys_half_the_targets_weight_in_all() -> None:
    """The rule of the docstring: (N − 1)·e^{−A·g} = 1/2, so the target holds ≥ 2/3 of the mass at any length ≤ N."""
    m, N = 24, 4_096
    g = carrier_gap(m, 1e4, N)
    assert g >= MIN_GAP
    assert (N - 1) * math.exp(-amplitude(m, 1e4, N) * g) == pytest.approx(0.5)


def test_constructed_run_retrieves_far_beyond_the_training_length(constructed: Run) -> None:
    """≥ 0.95 at 4× the training length, and still at the last length its table allows (256×)."""
    assert constructed.steps == 0 and constructed.verdict is not None and constructed.verdict.learned
    L = CONSTRUCTED.task.train_length
    far = [4 * L, CONSTRUCTED.model.max_positions]
    for report in evaluate(constructed.model, CONSTRUCTED, far, samples=SAMPLES):
        assert report.accuracy >= 0.95, report
        assert report.argmax_key == report.length - 1 - CONSTRUCTED.task.offset  # t − k, not pinned
        assert report.target_mass >= 2 / 3


def test_the_same_config_from_a_random_start_is_at_chance_there(learned: Run, constructed: Run) -> None:
    """Trained from its seed's random initialisation (the `learned` fixture: the same task and model),
    the run learns the task in range and is at chance at 4×: 1/V lies within CHANCE_TOLERANCE of its
    95% Wilson interval, on both sides."""
    assert learned.config == with_changes(CONSTRUCTED, init="random", steps=RunConfig().train.steps)
    assert learned.verdict.learned
    (report,) = evaluate(learned.model, learned.config, [4 * learned.config.task.train_length], samples=SAMPLES)
    low, high = wilson_interval(round(report.accuracy * SAMPLES), SAMPLES)
    chance = 1 / learned.config.task.vocab_size
    assert low - CHANCE_TOLERANCE <= chance <= high + CHANCE_TOLERANCE, (low, high)


def test_a_constructed_start_trained_on_starts_from_the_construction() -> None:
    """Steps > 0: the first step's loss is the construction's (the plain vote readout, ≈ 1.87 at V = 16)."""
    config = with_changes(CONSTRUCTED, steps=2)
    run = train(config, "cpu")
    V = config.task.vocab_size
    assert run.history["loss"][0] == pytest.approx(math.log(1 + (V - 1) / math.e), abs=1e-3)
    assert run.verdict is not None


def test_too_small_a_d_model_is_refused_by_the_config_naming_what_would_do() -> None:
    with pytest.raises(ConfigError, match=r"d_model 20 leaves 2 position pair.*smallest d_model above it that works is 24"):
        with_changes(CONSTRUCTED, d_model=20)
    with pytest.raises(ConfigError, match="d_model 16 leaves 0 position pair"):
        with_changes(CONSTRUCTED, d_model=16)
    assert with_changes(CONSTRUCTED, d_model=24).train.init == "constructed"  # the one it names is accepted


def test_the_command_line_stores_the_construction_and_reuses_it(home: Path) -> None:
    first = ok_json("construct", "--device", "cpu", "--json")
    assert first["run_id"] == CONSTRUCTED.run_id() and first["steps"] == 0 and not first["reused"]
    assert first["config"]["train"]["init"] == "constructed" and first["verdict"]["learned"]
    assert first["loss"] is None  # no step taken: no loss (JSON has no NaN)
    again = ok_json("construct", "--encoding", "learned", "--json")
    assert again["reused"] and again["run_id"] == first["run_id"]
    evaluated = ok_json("evaluate", first["run_id"], "--lengths", "64,4096", "--json")
    assert [row["accuracy"] for row in evaluated["lengths"]] == [1.0, 1.0]


def test_the_command_line_refuses_what_cannot_be_constructed(home: Path) -> None:
    assert_user_error(run_cli("construct", "--d-model", "20"), "the smallest d_model above it that works is 24")
    assert_user_error(run_cli("construct", "--encoding", "rope"), "init constructed", "encoding learned")
    assert_user_error(run_cli("construct", "--init", "random"), "unrecognized arguments: --init")

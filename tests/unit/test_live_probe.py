"""Live probes while training: the horizon and m_out predicted from the weights every few dozen steps,
recorded in the history, without changing a single weight, and only while their time fits the cost
rule (at most `probe_share` of the steps' time, lengen_core.training.Training). The training calls the
probe it is given (minGPT: the trainer knows nothing of its observers); the server gives it
lengen_core.analysis.horizon.live_probe (lengen.training_process.live_training)."""

from __future__ import annotations

import math

import pytest
import torch

from lengen import budget
from lengen.store import RunStore
from lengen.training_process import live_training
from lengen_core.analysis import horizon
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.horizon import PROBE_STEPS, Probe, live_probe, predicted_horizon, probe_interval
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import PROBE_SHARE, Training

CONFIG = with_changes(RunConfig(), steps=150, keep_training=True)


def trained(probe_every: int, probe_share: float = PROBE_SHARE) -> Training:
    training = Training(CONFIG, "cpu", probe=live_probe, probe_every=probe_every,
                        probe_estimate=horizon.probe_seconds_estimate(CONFIG), probe_share=probe_share)
    for _ in training:
        pass
    return training


def test_probes_read_the_weights_and_change_none_of_them():
    probed, plain = trained(50, probe_share=1e6), trained(0)  # a share no probe can exceed: every due one runs
    for name, tensor in plain.model.state_dict().items():
        assert torch.equal(tensor, probed.model.state_dict()[name]), name
    assert probed.history["probe_step"] == [50, 100, 150]  # none at step 1: nothing was spent on steps yet
    assert len(probed.history["probe_seconds"]) == 3 and min(probed.history["probe_seconds"]) > 0
    assert "probe_step" not in plain.history
    last = probed.history["horizon"][-1]
    assert last is not None and last >= 16
    margins = probed.history["m_out"]
    assert margins[-1] is not None and margins[0] is not None and margins[-1] > margins[0]


def test_the_live_horizon_agrees_with_the_full_prediction_within_its_resolution_and_draws():
    model = trained(0).model.eval()
    probe = live_probe(model, CONFIG, 150)
    exact = predicted_horizon(model, CONFIG, ceiling=probe.ceiling)
    assert probe.ceiling == horizon.horizon_ceiling(model) == 1 << 20  # as far as the Dilution page asks
    assert math.isfinite(probe.m_out)
    if exact.length is None:
        assert probe.horizon is None
        return
    if probe.horizon == exact.length or probe.horizon >= probe.ceiling:
        return
    # Fewer draws: where the two differ, the full prediction's accuracy there is within 0.02 of 0.9.
    L = CONFIG.task.train_length
    near = [n for n in {probe.horizon, probe.horizon + L // 4, exact.length, exact.length + 1} if n <= probe.ceiling]
    for p in predict(model, CONFIG, sorted(near)):
        if min(probe.horizon, exact.length) < p.length <= max(probe.horizon, exact.length) + L // 4:
            assert abs(p.accuracy - 0.9) <= 0.02, (probe.horizon, exact.length, p)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scheduled(monkeypatch, step_seconds: float, probe_seconds: float, estimate: float, steps: int = 400,
              share: float = 0.25) -> Training:
    """A training whose steps and probes take the given (fake) seconds: the probe schedule alone."""
    clock = FakeClock()
    config = with_changes(CONFIG, steps=steps)

    def probe(model, config, step):
        clock.now += probe_seconds
        return Probe(step, None, 64 * config.task.train_length, config.task.train_length, None)

    training = Training(config, "cpu", probe=probe, probe_every=PROBE_STEPS, probe_estimate=estimate,
                        probe_share=share)
    training.clock = clock

    def step():
        clock.now += step_seconds
        return 1.0, 0.5

    monkeypatch.setattr(training, "step", step)
    for _ in training:
        pass
    return training


STEP = 1 / 64  # seconds a fake step takes (exact in binary: the sums below are exact); the share buys STEP/4 a step


def test_a_probe_runs_only_when_the_probes_stay_within_their_share_of_the_steps_time(monkeypatch):
    training = scheduled(monkeypatch, step_seconds=STEP, probe_seconds=0.1, estimate=0.1)
    steps = training.history["probe_step"]
    # due every 50 steps; the k-th probe needs 0.1 k ≤ 0.25 · step / 64, i.e. step ≥ 25.6 k: every due one fits
    assert steps == [50, 100, 150, 200, 250, 300, 350, 400]
    assert training.probe_seconds == pytest.approx(0.8) and training.probe_seconds <= 0.25 * training.seconds


def test_an_expensive_probe_waits_and_a_cheap_first_estimate_is_corrected_by_the_measured_time(monkeypatch):
    slow = scheduled(monkeypatch, step_seconds=STEP, probe_seconds=0.5, estimate=0.5)
    assert slow.history["probe_step"] == [128, 256, 384]  # the k-th at step ≥ 128 k, due or not since step 50
    assert slow.probe_seconds <= 0.25 * slow.seconds
    corrected = scheduled(monkeypatch, step_seconds=STEP, probe_seconds=0.5, estimate=0.05)
    assert corrected.history["probe_step"] == [50, 256, 384]  # the estimate let the first in; its 0.5 s then counts
    none = scheduled(monkeypatch, step_seconds=STEP, probe_seconds=1.0, estimate=1.0, steps=200)
    assert none.history["probe_step"] == [] and none.history["probe_seconds"] == []  # too short a training for one


def test_a_training_probes_only_with_a_probe_to_call():
    with pytest.raises(ValueError, match="probe"):
        Training(CONFIG, "cpu", probe_every=PROBE_STEPS)


def test_the_server_trains_with_the_live_probe(tmp_path):
    training = live_training(CONFIG, "cpu", RunStore(tmp_path))
    assert training.probe is live_probe and training.probe_every == probe_interval(CONFIG)
    assert training._next_probe_seconds == horizon.probe_seconds_estimate(CONFIG)


def test_probes_are_spaced_by_the_steps_and_only_for_the_single_head():
    assert probe_interval(CONFIG) == PROBE_STEPS
    assert probe_interval(with_changes(CONFIG, steps=10_000)) == 500
    assert probe_interval(with_changes(CONFIG, n_layers=1)) == 0


def test_the_training_estimate_counts_the_probes_share_for_a_single_head_only(monkeypatch):
    single, deep = CONFIG, with_changes(CONFIG, n_layers=1)
    with_probes = budget.training_cost(single).seconds, budget.training_cost(deep).seconds
    monkeypatch.setattr(budget, "PROBE_SHARE", 0.0)
    assert with_probes[0] == pytest.approx((1 + PROBE_SHARE) * budget.training_cost(single).seconds)
    assert with_probes[1] == pytest.approx(budget.training_cost(deep).seconds)


def test_the_first_probe_estimate_grows_with_the_vocabulary_and_covers_more_keys_without_a_relative_encoding():
    estimate = horizon.probe_seconds_estimate
    assert estimate(with_changes(CONFIG, vocab_size=64)) > 20 * estimate(CONFIG)  # V³ draws
    assert estimate(with_changes(CONFIG, encoding="learned")) > estimate(CONFIG)  # one sweep per length


def test_the_live_horizon_follows_a_run_past_64x_as_far_as_the_prediction_reaches():
    """The RoPE preset reaches 8,192 tokens (512×): the live probe, once capped at 1,024, now finds it to within
    an eighth (LIVE_RESOLUTION), where the full prediction with the same ceiling does."""
    from lengen.presets import PRESETS
    from lengen.store import preset_store

    run = preset_store().load(PRESETS["RoPE"].run_id())
    model = run.model.eval()
    probe = live_probe(model, run.config, run.steps)
    exact = predicted_horizon(model, run.config)
    assert exact.length > 64 * run.config.task.train_length  # the case the old cap cut
    assert probe.horizon is not None and abs(probe.horizon - exact.length) <= horizon.LIVE_RESOLUTION * exact.length

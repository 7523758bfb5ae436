"""Live probes while training: the horizon and m_out predicted from the weights every few dozen steps,
recorded in the history, without changing a single weight."""

from __future__ import annotations

import math

import torch

from lengen_core.config import RunConfig, with_changes
from lengen_core.horizon import PROBE_STEPS, live_probe, predicted_horizon, probe_interval
from lengen_core.training import Training

CONFIG = with_changes(RunConfig(), steps=150, keep_training=True)


def trained(probe_every: int) -> Training:
    training = Training(CONFIG, "cpu", probe_every=probe_every)
    for _ in training:
        pass
    return training


def test_probes_read_the_weights_and_change_none_of_them():
    probed, plain = trained(50), trained(0)
    for name, tensor in plain.model.state_dict().items():
        assert torch.equal(tensor, probed.model.state_dict()[name]), name
    assert probed.history["probe_step"] == [1, 50, 100, 150]
    assert "probe_step" not in plain.history
    untrained, *_, last = probed.history["horizon"]
    assert untrained is None  # step 1: below 0.9 at the training length
    assert last is not None and last >= 16
    assert probed.history["m_out"][-1] is not None and probed.history["m_out"][-1] > probed.history["m_out"][1]


def test_the_live_horizon_agrees_with_the_exact_one_within_its_resolution():
    model = trained(0).model.eval()
    probe = live_probe(model, CONFIG, 150)
    exact = predicted_horizon(model, CONFIG, ceiling=probe.ceiling)
    assert probe.ceiling == 64 * 16
    if exact.length is None:
        assert probe.horizon is None
    else:
        assert exact.length - 16 // 4 <= probe.horizon <= exact.length
    assert math.isfinite(probe.m_out)


def test_probes_are_spaced_by_the_steps_and_only_for_the_single_head():
    assert probe_interval(CONFIG) == PROBE_STEPS
    assert probe_interval(with_changes(CONFIG, steps=10_000)) == 500
    assert probe_interval(with_changes(CONFIG, n_layers=1)) == 0

"""What ships precomputed with the presets is what the app would compute: the same calls, the same
numbers (every field but the wall time), and the app reads it instead of computing."""

from __future__ import annotations

import dataclasses

import pytest

from lengen_core.dilution import predict
from lengen_core.evaluate import evaluate
from lengen_core.serving.store import preset_store
from ui.presets import DILUTION_SAMPLES, PRESETS, START_LENGTHS, START_SAMPLES, dilution_lengths, precomputed

SINGLE_HEAD = [label for label, config in PRESETS.items() if config.single_head]


@pytest.mark.parametrize("label", SINGLE_HEAD)
def test_the_shipped_numbers_are_the_computed_ones(label):
    config = PRESETS[label]
    run = preset_store().load(config.run_id())
    shipped = precomputed(config.run_id())
    start = shipped["evaluations"][str(START_SAMPLES)]
    assert {int(n) for n in start} >= {n for n in START_LENGTHS if n <= 4096}
    dilution = shipped["evaluations"][str(DILUTION_SAMPLES)]
    for samples, lengths in ((START_SAMPLES, (START_LENGTHS[0], START_LENGTHS[-1])), (DILUTION_SAMPLES, (64, 1024))):
        table = shipped["evaluations"][str(samples)]
        for n in lengths:
            fresh = dataclasses.asdict(evaluate(run.model, config, [n], samples=samples)[0])
            assert {k: v for k, v in table[str(n)].items() if k != "seconds"} == pytest.approx(
                {k: v for k, v in fresh.items() if k != "seconds"}, rel=1e-6, abs=1e-9)  # another CPU: last bits
    lengths = [n for n in dilution_lengths(config) if str(n) in dilution]
    assert set(shipped["predictions"]) == {str(n) for n in lengths}
    for prediction in predict(run.model, config, lengths[:3]):
        assert shipped["predictions"][str(prediction.length)] == pytest.approx(dataclasses.asdict(prediction), rel=1e-6,
                                                                               abs=1e-9)
    horizon = shipped["horizon"]  # the predicted horizon: ≥ 0.9 at it, below one token further (if it falls)
    around = [n for n in (horizon["length"], horizon["below"]) if n is not None]
    accuracies = [p.accuracy for p in predict(run.model, config, around)]
    if horizon["length"] is not None:
        assert accuracies[0] >= horizon["threshold"]
    if horizon["below"] is not None:
        assert accuracies[-1] < horizon["threshold"]
        assert horizon["below"] == (config.task.train_length if horizon["length"] is None else horizon["length"] + 1)


def test_a_run_that_is_not_a_preset_has_nothing_shipped():
    assert precomputed("rope-softmax-retrieval-s0-000000000000") == {}

"""What ships precomputed with the presets is what the app would compute: the same calls, the same
numbers (every field but the wall time), and the app reads it instead of computing."""

from __future__ import annotations

import dataclasses

import pytest

from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate
from lengen_core.models.initial import initial_model
from lengen_core.optimisation import trace_training
from lengen_core.serving.store import preset_store
from ui.presets import (
    DILUTION_SAMPLES,
    OPTIMISATION_CONSTRUCTED,
    OPTIMISATION_TRACES,
    PRESETS,
    START_LENGTHS,
    START_SAMPLES,
    TRACE_LENGTHS,
    TRACE_ROWS,
    TRACE_SAMPLES,
    dilution_lengths,
    precomputed,
    shipped_trace,
)

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
            assert table[str(n)]["rule"] == fresh["rule"] == "none"  # read as trained
            assert {k: v for k, v in table[str(n)].items() if k not in ("seconds", "rule")} == pytest.approx(
                {k: v for k, v in fresh.items() if k not in ("seconds", "rule")}, rel=1e-6, abs=1e-9)  # another CPU
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


@pytest.mark.slow
@pytest.mark.parametrize("config, every", OPTIMISATION_TRACES, ids=lambda v: getattr(v, "run_id", lambda: str(v))())
def test_the_shipped_optimisation_traces_are_the_computed_ones(config, every):
    shipped = shipped_trace(config, every, TRACE_LENGTHS, TRACE_SAMPLES)
    assert shipped is not None, f"{config.run_id()} every {every}: run python -m scripts.build_presets --precompute"
    fresh = trace_training(config, every, TRACE_LENGTHS, TRACE_SAMPLES)
    assert shipped.gradient_steps == fresh.gradient_steps and shipped.evaluation_steps == fresh.evaluation_steps
    assert shipped.losses == pytest.approx(fresh.losses, rel=1e-5, abs=1e-9)  # another CPU: last bits
    assert shipped.row_gradient_norms == pytest.approx(fresh.row_gradient_norms[:, :TRACE_ROWS], rel=1e-4, abs=1e-9)
    assert shipped.largest_row_gradient == pytest.approx(fresh.largest_row_gradient, rel=1e-4, abs=1e-9)
    assert shipped.largest_gradient_beyond() == fresh.largest_gradient_beyond()  # 0.0 exactly: never read
    for old, new in zip(shipped.evaluations, fresh.evaluations, strict=True):
        assert [(r.accuracy, r.argmax_key) for r in old] == [(r.accuracy, r.argmax_key) for r in new]


def test_the_constructed_head_ships_its_evaluations():
    config = OPTIMISATION_CONSTRUCTED
    shipped = precomputed(config.run_id())["evaluations"][str(START_SAMPLES)]
    assert {int(n) for n in shipped} == set(START_LENGTHS)
    fresh = evaluate(initial_model(config), config, [START_LENGTHS[-1]], samples=START_SAMPLES)[0]
    assert shipped[str(START_LENGTHS[-1])]["rule"] == fresh.rule == "none"
    assert {k: v for k, v in shipped[str(START_LENGTHS[-1])].items() if k not in ("seconds", "rule")} == pytest.approx(
        {k: v for k, v in dataclasses.asdict(fresh).items() if k not in ("seconds", "rule")}, rel=1e-6, abs=1e-9)

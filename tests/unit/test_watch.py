"""The live view of a training (lengen_core.watch): the same carrier the Carrier page reads from the same
weights, the Attention page's map, none for a transformer, and views every VIEW_EVERY steps and at a pause."""

from __future__ import annotations

import numpy as np
import torch

from lengen_core.carrier import extract_carrier
from lengen_core.heatmap import attention_heatmap
from lengen_core.serving.store import preset_store
from lengen_core.watch import VIEW_EVERY, live_view, view_due
from ui.presets import PRESETS


def test_the_live_carrier_and_map_are_the_pages_for_the_same_weights():
    run = preset_store().load(PRESETS["RoPE"].run_id(), "cpu")
    view = live_view(run.model, run.config, step=7)
    page = extract_carrier(run.model, run.config, search_length=1)
    assert view.analytic and view.step == 7
    np.testing.assert_allclose(view.carrier, page.values, rtol=0, atol=1e-9)
    assert view.heatmap.length == 4 * run.config.task.train_length
    np.testing.assert_array_equal(view.heatmap.weights, attention_heatmap(run.model, run.config, 64, max_cells=64).weights)
    assert int(np.argmax(view.carrier[: run.config.task.train_length])) == run.config.task.offset


def test_a_learned_table_is_measured_over_its_training_range_and_a_transformer_has_no_view():
    run = preset_store().load(PRESETS["Learned (APE)"].run_id(), "cpu")
    run.model.train()
    view = live_view(run.model, run.config, step=3)
    assert not view.analytic and view.carrier.shape == (run.config.task.train_length,)
    assert run.model.training  # left as the training had it
    transformer = preset_store().load(PRESETS["Transformer RoPE"].run_id(), "cpu")
    assert live_view(transformer.model, transformer.config, step=3) is None


def test_views_come_every_few_steps_and_once_where_a_paused_run_stopped():
    assert not view_due(0, 0, paused=True)  # nothing trained yet
    assert not view_due(VIEW_EVERY - 1, 0, paused=False) and view_due(VIEW_EVERY, 0, paused=False)
    assert view_due(5, 0, paused=True) and not view_due(5, 5, paused=True)


def test_reading_the_view_draws_no_random_number():
    run = preset_store().load(PRESETS["RoPE"].run_id(), "cpu")
    state = torch.get_rng_state()
    live_view(run.model, run.config, step=1)
    assert torch.equal(torch.get_rng_state(), state)

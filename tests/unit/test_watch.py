"""The live view of a training (lengen_core.analysis.watch): the same carrier the Carrier page reads from the same
weights, the Attention page's map, a transformer's carrier head as the Transformer page finds it, and views
every VIEW_EVERY steps and at a pause."""

from __future__ import annotations

import numpy as np
import torch

from lengen.presets import PRESETS
from lengen.store import preset_store
from lengen_core.analysis.carrier import extract_carrier
from lengen_core.analysis.heatmap import attention_heatmap
from lengen_core.analysis.watch import VIEW_EVERY, live_view, view_due


def test_the_live_carrier_and_map_are_the_pages_for_the_same_weights():
    run = preset_store().load(PRESETS["RoPE"].run_id(), "cpu")
    view = live_view(run.model, run.config, step=7)
    page = extract_carrier(run.model, run.config, search_length=1)
    assert view.analytic and view.step == 7
    np.testing.assert_allclose(view.carrier, page.values, rtol=0, atol=1e-9)
    assert view.heatmap.length == 4 * run.config.task.train_length
    np.testing.assert_array_equal(view.heatmap.weights, attention_heatmap(run.model, run.config, 64, max_cells=64).weights)
    assert int(np.argmax(view.carrier[: run.config.task.train_length])) == run.config.task.offset


def test_a_learned_table_is_measured_over_its_training_range():
    run = preset_store().load(PRESETS["Learned (APE)"].run_id(), "cpu")
    run.model.train()
    view = live_view(run.model, run.config, step=3)
    assert not view.analytic and view.carrier.shape == (run.config.task.train_length,)
    assert view.head is None
    assert run.model.training  # left as the training had it


def test_a_transformers_view_is_its_carrier_head_as_the_transformer_page_finds_it():
    """The head putting most weight on t − k (HEAD_SAMPLES sequences): its measured s(Δ) and its map at 4×.
    On the RoPE transformer preset that head peaks at k and its map's last query reads t − k."""
    from lengen_core.analysis.heads import analyse_heads
    from lengen_core.analysis.watch import HEAD_SAMPLES

    run = preset_store().load(PRESETS["Transformer RoPE"].run_id(), "cpu")
    run.model.train()
    state = torch.get_rng_state()
    view = live_view(run.model, run.config, step=5)
    assert torch.equal(torch.get_rng_state(), state) and run.model.training
    reports = analyse_heads(run.model.eval(), run.config, samples=HEAD_SAMPLES)
    best = max(reports, key=lambda report: report.target_weight)
    assert view.head == (best.layer, best.head) and view.target_weight == best.target_weight
    np.testing.assert_array_equal(view.carrier, best.carrier)
    L, k = run.config.task.train_length, run.config.task.offset
    assert not view.analytic and view.carrier.shape == (L,) and int(np.argmax(view.carrier)) == k
    expected = attention_heatmap(run.model, run.config, 4 * L, max_cells=64, layer=best.layer, head=best.head)
    np.testing.assert_array_equal(view.heatmap.weights, expected.weights)
    assert int(view.heatmap.argmax_keys[-1]) == 4 * L - 1 - k


def test_views_come_every_few_steps_and_once_where_a_paused_run_stopped():
    assert not view_due(0, 0, paused=True)  # nothing trained yet
    assert not view_due(VIEW_EVERY - 1, 0, paused=False) and view_due(VIEW_EVERY, 0, paused=False)
    assert view_due(5, 0, paused=True) and not view_due(5, 5, paused=True)


def test_reading_the_view_draws_no_random_number():
    run = preset_store().load(PRESETS["RoPE"].run_id(), "cpu")
    state = torch.get_rng_state()
    live_view(run.model, run.config, step=1)
    assert torch.equal(torch.get_rng_state(), state)

"""lengen.api, the lab's public Python API: each function gives the numbers the app's page gives for the same
request, because it makes the page's call; results are the core's typed objects; refusals are ValueErrors
that say what to change. On the shipped presets (offline, a fraction of a second each) and one tiny training."""

from __future__ import annotations

import numpy as np
import pytest

from lengen import api
from lengen.first_visit import from_dict, request_lengths
from lengen.shipped_rules import shipped_rule
from lengen.store import RunStore, preset_store
from lengen_core.analysis.evaluate import evaluate as core_evaluate
from ui.charts import common as charts
from ui.charts import compare as compare_charts

ROPE, LEARNED = api.single_head_presets()["RoPE"], api.single_head_presets()["Learned (APE)"]


@pytest.fixture(scope="module")
def rope() -> api.Run:
    return api.load(ROPE)


def test_every_public_name_is_there_and_the_results_are_the_cores_own_types():
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert not missing
    from lengen_core.measure import Measurement  # the API re-exports the core's types, not copies of them

    assert api.Measurement is Measurement


def test_load_reads_a_preset_offline_ready_to_read(rope):
    assert rope.run_id == ROPE and rope.verdict is not None and rope.verdict.learned
    assert not rope.model.training and not any(p.requires_grad for p in rope.model.parameters())
    assert {ROPE, LEARNED} <= {summary.run_id for summary in api.runs()}
    with pytest.raises(api.StoreError, match="api.runs"):
        api.load("no-such-run")


def test_measure_at_the_default_request_gives_the_numbers_the_preset_shipped_for_its_pages(rope):
    m = api.measure(rope)
    shipped = from_dict(preset_store().first_visit(ROPE))
    assert m.lengths == request_lengths(rope) and m.samples == api.DEFAULT_SAMPLES
    assert m.fit == shipped.fit and m.predicted_horizon == shipped.horizon
    assert list(m.reports) == [shipped.evaluations[api.DEFAULT_SAMPLES][n] for n in m.lengths]
    assert m.fit.fit is not None and 5 < m.fit.fit.m_out < 9  # RoPE's law (C6)


def test_evaluate_takes_back_only_what_the_same_call_gives(rope):
    """The Start page's picture: shipped numbers where they answer, and they are what evaluating afresh gives."""
    lengths = (16, 256, 4096)
    reports = api.evaluate(rope, lengths, api.START_SAMPLES)
    fresh = core_evaluate(rope.model, rope.config, lengths, samples=api.START_SAMPLES)
    assert [r.accuracy for r in reports] == [r.accuracy for r in fresh]
    other_seed = api.evaluate(rope, (16, 64), 32, seed=7)  # not shipped: measured
    assert [r.samples for r in other_seed] == [32, 32]


def test_the_start_pages_picture_rope_extrapolates_learned_positions_fall_to_chance():
    curves = api.accuracy_table({label: run_id for label, run_id in api.single_head_presets().items()})
    assert set(curves["run"]) == set(api.single_head_presets())
    assert tuple(curves.loc[curves["run"] == "RoPE", "length"]) == api.START_LENGTHS
    rope = curves[curves["run"] == "RoPE"]
    learned = curves[(curves["run"] == "Learned (APE)") & (curves["length"] > 16)]
    assert rope["accuracy"].min() > 0.9 and learned["accuracy"].max() < 0.2  # C1
    figure = compare_charts.accuracy_overlay(curves, 1 / 16)
    assert {trace.name for trace in figure.data} >= set(api.single_head_presets())


def test_the_dilution_table_is_what_the_dilution_chart_draws(rope):
    m = api.measure(rope)
    table, fit_table = api.dilution_table(m)
    assert list(table["length"]) == list(m.lengths)
    assert np.allclose(table["predicted_mass"], [p.target_mass for p in m.predictions])
    assert fit_table is not None and fit_table["length"].min() == rope.config.task.train_length
    names = {trace.name for trace in charts.dilution(table, fit_table, 1 / 16).data}
    assert {"accuracy measured", "p predicted", "p fitted law"} <= names
    bare = api.dilution_table(api.measure(rope, (16, 48), 32, predict=False, horizon=False))  # 48: none shipped
    assert bare.fit_table is None and bare.table["predicted_mass"].isna().all()


def test_a_rule_curve_is_the_shipped_one_where_the_preset_ships_it(rope):
    ruled = api.rule_curve(rope, "log-n")
    assert ruled.rule == "log-n" and max(ruled.lengths) <= api.RULE_LONGEST
    assert ruled == shipped_rule(rope, "log-n", ruled.lengths, api.DEFAULT_SAMPLES)
    plain = api.rule_curve(rope, "none")
    assert plain.lengths == ruled.lengths and plain.rule == "none"
    table = api.curve_table({"as trained": plain, "log-n": ruled})  # the Compare page's long table
    assert list(table["rule"].unique()) == ["none", "log-n"] and len(table) == 2 * len(ruled.lengths)
    assert {trace.name for trace in compare_charts.mass_overlay(table).data} >= {"as trained", "log-n"}
    with pytest.raises(api.RuleError):
        api.rule_curve(LEARNED, "ntk")  # a frequency rule is RoPE's alone


def test_carrier_heatmap_and_compare_read_the_run(rope):
    carrier = api.carrier(rope)
    assert carrier.argmax_offset == rope.config.task.offset and carrier.alignment  # C5
    heatmap = api.heatmap(rope, 64)
    assert heatmap.length == 64 and heatmap.argmax_keys[-1] == 63 - rope.config.task.offset  # C3: j* = t − k
    found = api.compare([rope, LEARNED])
    assert list(found) == [ROPE, LEARNED]
    assert found[ROPE].m_out == api.measure(rope).fit.fit.m_out and found[LEARNED].m_out is None
    assert found[ROPE].carrier.metrics == carrier.metrics


def test_the_shipped_sweep_reads_back_with_its_collapse():
    grid = api.shipped_sweeps()[0]
    from ui.sweep_panels import PRESET_GRID  # the Sweeps page's sweep

    assert grid == PRESET_GRID
    swept = api.sweep(grid)
    assert len(swept.cells) == grid.size and swept.collapse.result is not None
    assert swept.collapse.result.rms < 0.2  # C6: the learned RoPE runs on one curve


def test_delays_reads_a_delay_run_against_the_delay():
    curve = api.delays(api.delay_presets()["Delay-copy RoPE"], "2-4", samples=16)
    assert [p.delay for p in curve.points] == [2, 3, 4] and all(p.seen for p in curve.points)


def test_train_stores_a_run_and_reuses_it(tmp_path):
    store = RunStore(tmp_path)
    steps = []
    run = api.train(store=store, progress=steps.append, d_model=16, steps=12, batch_size=32)
    assert run.config.train.steps == 12 and [s.step for s in steps] == list(range(1, 13))
    assert api.load(run.run_id, store).run_id == run.run_id
    again = api.train(store=store, progress=steps.append, d_model=16, steps=12, batch_size=32)
    assert again.run_id == run.run_id and len(steps) == 12  # stored: not trained again
    longer = api.train_longer(run, 4, store=store)
    assert longer.config.train.continues == run.run_id and longer.steps == 4
    with pytest.raises(api.ConfigError):
        api.train(store=store, save=False, offset=99)

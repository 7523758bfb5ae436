"""The data collapse (lengen_core.analysis.collapse): the vote model's master curve and the two spreads."""

from __future__ import annotations

import numpy as np
import pytest

from lengen_core.analysis.collapse import _decreasing_fit, collapse, scaled_length, vote_accuracy


def test_the_master_curve_runs_from_certain_to_chance():
    x = np.array([1e-4, 1e-2, 1.0, 1e2, 1e6])
    for V in (2, 16, 64):
        a = vote_accuracy(x, V)
        assert a[0] == pytest.approx(1.0, abs=1e-6) and a[-1] == pytest.approx(1 / V, rel=0.05)
        assert np.all(np.diff(a) < 0)
    assert vote_accuracy(np.array([1.0]), 2)[0] == pytest.approx(0.7602, abs=1e-3)  # P(z1 + 1 > z2) = Φ(1/√2)


def test_the_decreasing_fit_is_the_least_squares_non_increasing_curve():
    values = np.array([1.0, 0.8, 0.9, 0.3, 0.4, 0.1])
    fitted = _decreasing_fit(np.arange(6.0), values)
    assert np.allclose(fitted, [1.0, 0.85, 0.85, 0.35, 0.35, 0.1])
    shuffled = np.array([3, 0, 5, 1, 4, 2])  # the order comes from the key, not the array
    assert np.allclose(_decreasing_fit(shuffled.astype(float), values), _decreasing_fit(np.arange(6.0), values[np.argsort(shuffled)])[np.argsort(np.argsort(shuffled))])


def test_runs_that_follow_the_law_collapse_and_their_raw_curves_do_not():
    rng = np.random.default_rng(0)
    lengths = np.array([16, 64, 256, 1024, 4096, 16384])
    n, a, m, V = [], [], [], []
    for margin in (4.0, 5.0, 6.0, 7.0):  # four runs, each on its own raw curve
        accuracy = vote_accuracy(scaled_length(lengths, margin, 16), 16) + rng.normal(0, 0.01, lengths.size)
        n += list(lengths)
        a += list(accuracy)
        m += [margin] * lengths.size
        V += [16] * lengths.size
    result = collapse(np.array(n), np.array(a), np.array(m), np.array(V))
    assert result.points == 24 and result.rms < 0.02 and result.rms_unscaled < 0.02  # on the curve, up to the noise
    assert result.scale == pytest.approx(1.0, rel=0.2)
    assert result.spread_scaled < 0.02 and result.spread_raw > 0.05  # measured: 0.008 and 0.09


def test_collapse_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="one length, accuracy"):
        collapse(np.array([16, 32]), np.array([1.0]), np.array([5.0]), np.array([16]))


def test_runs_whose_far_keys_count_more_than_their_average_get_the_scale_fitted():
    lengths = np.array([16, 64, 256, 1024, 4096, 16384, 65536])
    n, a, m = [], [], []
    for margin in (5.5, 6.0, 6.5, 7.0):
        n += list(lengths)
        a += list(vote_accuracy(300 * scaled_length(lengths, margin, 16), 16))  # behaving as if 300× the keys
        m += [margin] * lengths.size
    result = collapse(np.array(n), np.array(a), np.array(m), np.full(len(n), 16))
    assert result.scale == pytest.approx(300, rel=0.05) and result.rms < 0.01
    assert result.rms_unscaled > 0.2  # the vote model with m_out as it is misses by far


def test_the_preset_sweeps_rope_runs_collapse_onto_the_master_curve():
    """The shipped preset sweep (3 seeds × offsets 1, 3, 5, 7, RoPE): closer to the master curve, and to the
    best decreasing curve in the scaled length, than to the best curve in raw length."""
    from lengen.sweep import collapse_summary
    from ui.sweep_panels import preset_result

    summary = collapse_summary(preset_result().cells)
    assert summary["points"] == 12 * 13  # 12 learned RoPE runs, 13 lengths each from L_train
    assert summary["rms"] < 0.11 < summary["spread_raw"]  # measured 0.102 and 0.118
    assert summary["spread_scaled"] < 0.6 * summary["spread_raw"]  # measured 0.069 against 0.118
    assert summary["rms_unscaled"] > 0.4 and 100 < summary["scale"] < 2_000  # measured 0.48 and 472


def _cell(run_id: str, encoding: str = "rope", learned: bool = True, m_out: float | None = 5.0, offset: int = 3,
          seed: int = 0, accuracies=(1.0, 0.97, 0.9, 0.6, 0.3)) -> dict:
    lengths = [8, 16, 64, 256, 1024]  # 8 < L_train 16: never a point
    return {"encoding": encoding, "attention": "softmax", "offset": offset, "train_length": 16, "vocab_size": 16,
            "seed": seed, "run_id": run_id, "learned": learned, "m_out": m_out,
            "lengths": [{"length": n, "accuracy": a} for n, a in zip(lengths, accuracies, strict=True)]}


def test_the_collapse_filter_is_one_and_its_points_carry_their_keys():
    """One filter (lengen.sweep.collapse_cells) for the collapse, its summary and the page's points: learned RoPE
    cells with a fitted m_out, lengths ≥ L_train. Each point carries its run id and its own x, so the page's
    points are the collapse's whatever the cells' order (it used to lay the collapse's x over a frame it
    built with its own copy of the filter, by position)."""
    from lengen.sweep import collapse_cells, collapse_summary, sweep_collapse
    from ui.sweep_panels import collapse_frame

    cells = [_cell("a", m_out=5.0), _cell("ape", encoding="learned", m_out=None), _cell("b", m_out=6.5, offset=5),
             _cell("no-law", m_out=None), _cell("not-learned", learned=False), _cell("c", m_out=4.0, seed=1)]
    assert [c["run_id"] for c in collapse_cells(cells)] == ["a", "b", "c"]
    found = sweep_collapse(cells)
    assert found.runs == 3 and len(found.points) == 3 * 4 == found.result.points
    for point in found.points:  # each point's x from its own m_out, wherever it sits
        assert point["x"] == pytest.approx(float(scaled_length(point["length"], point["m_out"], 16)))
    points, _, summary = collapse_frame(list(reversed(cells)))
    same = collapse_summary(cells)  # the same points in another order: equal up to rounding
    assert {k: v for k, v in summary.items() if isinstance(v, str | int)} == {k: v for k, v in same.items()
                                                                           if isinstance(v, str | int)}
    assert {k: v for k, v in summary.items() if isinstance(v, float)} == pytest.approx(
        {k: v for k, v in same.items() if isinstance(v, float)}, rel=1e-6)
    by_key = {(p["run_id"], p["length"]): (p["x"], p["accuracy"]) for p in found.points}
    assert {(r.run_id, r.length): (r.x, r.accuracy) for r in points.itertuples()} == by_key


def test_a_sweeps_configs_are_read_from_each_cell_not_its_place():
    """SweepResult.configs: a cell's config from its own settings, so a reordered list keeps each run's config."""
    from lengen.sweep import SweepGrid, SweepResult

    grid = SweepGrid(encodings=("rope", "learned"), offsets=(1, 3))
    cells = [{**settings, "run_id": f"run-{settings['encoding']}-{settings['offset']}"} for settings in grid.cells()]
    configs = SweepResult("s", grid, list(reversed(cells))).configs()
    assert {(c.model.encoding, c.task.offset) for c in configs.values()} == {("rope", 1), ("rope", 3), ("learned", 1),
                                                                            ("learned", 3)}
    assert all(run_id == f"run-{c.model.encoding}-{c.task.offset}" for run_id, c in configs.items())

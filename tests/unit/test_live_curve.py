"""The live training chart's x-axis follows the steps done, not the configured step count."""

from __future__ import annotations

from ui.training.live import live_curve


def history(steps: list[int]) -> dict[str, list[float]]:
    return {"step": steps, "loss": [2.0 / (1 + s) for s in steps], "accuracy": [min(1.0, s / 200) for s in steps]}


def test_a_run_stopping_early_fills_the_width() -> None:
    figure = live_curve(history(list(range(10, 251, 10))), 250)  # a 3,000-step run done at step 250
    assert tuple(figure.layout.xaxis.range) == (0, 250)


def test_the_axis_grows_with_the_steps_done() -> None:
    assert tuple(live_curve(history([1, 2, 3]), 3).layout.xaxis.range) == (0, 3)
    assert tuple(live_curve(history(list(range(1, 1201))), 1200).layout.xaxis.range) == (0, 1200)


def test_the_axis_never_cuts_off_a_recorded_point_nor_collapses() -> None:
    assert tuple(live_curve(history([100, 200]), 150).layout.xaxis.range) == (0, 200)
    assert tuple(live_curve(history([]), 0).layout.xaxis.range) == (0, 1)


def test_the_live_curve_reads_the_steps_beside_the_fewer_probes():
    """A probed training's history holds the probes too (one every few dozen steps): the loss and
    accuracy curve is drawn from the per-step lists alone."""
    probed = {**history(list(range(1, 121))), "probe_step": [1, 50, 100], "horizon": [None, 32, 64],
              "m_out": [None, 3.1, 4.2], "probe_ceiling": [1024] * 3, "train_length": [16] * 3}
    figure = live_curve(probed, 120)
    assert [len(trace.x) for trace in figure.data] == [120, 120]

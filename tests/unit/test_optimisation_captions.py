"""The optimisation experiment's captions (ui.theory.gradient_charts) follow the numbers they are given:
each says C1 is borne out only when the data bear it out, and says "does NOT" otherwise; its charts'
hovers give rounded numbers."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from lengen_core.analysis.evaluate import wilson_interval
from ui.theory import gradient_charts as charts

L, K, V, N = 16, 3, 16, 4_096
CHANCE = 1 / V
SAMPLES = 256
LENGTHS = [L << p for p in range(9)]
UNFORMATTED = re.compile(r"%\{(?!fullData\.)[^}:]+\}")


def rows(start: str, x: str, points: list[tuple[int, float, int]]) -> pd.DataFrame:
    """(x value, accuracy, argmax key) → the table the page builds (a LengthReport's fields)."""
    table = []
    for value, accuracy, key in points:
        low, high = wilson_interval(round(accuracy * SAMPLES), SAMPLES)
        length = value if x == "length" else 4 * L
        table.append({"start": start, x: value, "length": length, "samples": SAMPLES, "accuracy": accuracy,
                      "accuracy_low": low, "accuracy_high": high, "argmax_key": key, "argmax_share": 0.5,
                      "target_mass": accuracy})
    return pd.DataFrame(table)


def reach(built: float, trained: float) -> pd.DataFrame:
    return pd.concat([rows(charts.CONSTRUCTED, "length", [(n, 1.0 if n == L else built, n - 1 - K) for n in LENGTHS]),
                      rows(charts.RANDOM, "length", [(n, 1.0 if n == L else trained, 12) for n in LENGTHS])])


def drift(last: float, last_key: int) -> pd.DataFrame:
    built = rows(charts.CONSTRUCTED, "step", [(0, 1.0, 4 * L - 1 - K), (200, (1 + last) / 2, 60), (400, last, last_key)])
    return pd.concat([built, rows(charts.RANDOM, "step", [(0, 0.06, 12), (262, 0.066, 12)])])


def test_reach_caption_bears_out_c1_only_when_both_halves_hold() -> None:
    text = charts.reach_caption(reach(1.0, 0.06), CHANCE, L, K, N)
    assert "answers 1.00 at 4×" in text and "can express the relative rule" in text and "does NOT" not in text
    weak = charts.reach_caption(reach(0.5, 0.06), CHANCE, L, K, N)
    assert "does NOT bear out C1" in weak and "built head is below 0.95" in weak
    above = charts.reach_caption(reach(1.0, 0.4), CHANCE, L, K, N)
    assert "does NOT bear out C1" in above and "trained run is above chance" in above


def test_gradient_caption_says_so_when_a_row_past_the_training_length_moved() -> None:
    assert "never read in training" in charts.gradient_caption(262, L, N, 0.8, 0.0)
    assert "does NOT bear out C1" in charts.gradient_caption(262, L, N, 0.8, 1e-9)


@pytest.mark.parametrize("last, key, says", [
    (0.97, 60, "kept the relative rule"),
    (0.06, 12, "fits the training range only"),
    (0.22, 12, "not yet to chance"),
])
def test_drift_caption_follows_the_last_point(last: float, key: int, says: str) -> None:
    text = charts.drift_caption(drift(last, key), CHANCE, L, K, (1.0, 1.0), (1.87, 0.0045), 0.0)
    assert says in text
    assert f"went from 1.00 to {last:.2f}" in text
    assert ("(t − k" if key == 60 else "(inside the training range") in text.split("moved from")[1].split(" to ", 1)[1]
    assert "ended at 0.07" in text and "no gradient here either" in text


def test_the_charts_hovers_are_rounded_and_the_heatmap_blanks_exact_zeros() -> None:
    norms = np.zeros((3, N))
    norms[:, :L] = 0.5
    figures = [charts.reach(reach(1.0, 0.06), CHANCE, L, N), charts.gradients(norms, (1, 10, 20), L, 4 * L),
               charts.drift(drift(0.2, 12), CHANCE, 4 * L)]
    for figure in figures:
        for trace in figure.data:
            assert not UNFORMATTED.search(trace.hovertemplate or ""), trace.hovertemplate
    z = np.asarray(figures[1].data[0].z, dtype=float)
    assert np.isnan(z[L:]).all() and np.isfinite(z[:L]).all()

"""Tables the lab's chart builders draw (ui/charts: plain data in, a plotly figure out), made from the API's
results, so a notebook draws the app's own figures (lengen.api re-exports these)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from lengen.api.reading import evaluate
from lengen.api.runs import RunLike, as_run
from lengen.first_visit import allowed
from lengen.presets import START_LENGTHS, START_SAMPLES
from lengen.store import RunStore
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.config import ConfigError
from lengen_core.measure import Measurement


def accuracy_table(runs: Mapping[str, RunLike], lengths: Sequence[int] = START_LENGTHS,
                   samples: int = START_SAMPLES, store: RunStore | None = None) -> pd.DataFrame:
    """Each run's accuracy (with its 95% Wilson interval) at each length its encoding allows (`evaluate`), one
    row per run and length, `run` the mapping's label: the long table ui.charts.compare.accuracy_overlay draws.
    At the defaults and for the single-head presets, the Start page's picture."""
    parts = []
    for label, item in runs.items():
        run = as_run(item, store)
        kept = allowed(run, lengths)
        rows = evaluate(run, kept, samples, store=store)
        parts.append(pd.DataFrame({
            "run_id": run.run_id, "run": label, "length": list(kept), "samples": [r.samples for r in rows],
            "accuracy": [r.accuracy for r in rows], "accuracy_low": [r.accuracy_low for r in rows],
            "accuracy_high": [r.accuracy_high for r in rows]}))
    return pd.concat(parts, ignore_index=True)


def curve_table(curves: Mapping[str, Measurement]) -> pd.DataFrame:
    """Measurements side by side, one row per curve and length, `run` the mapping's label (a run, or a run under
    a rule): accuracy with its 95% Wilson interval, target mass and the prediction's (NaN without one). The long
    table the Compare page draws (ui.charts.compare.accuracy_overlay, mass_overlay)."""
    parts = []
    for label, m in curves.items():
        predicted = [p.target_mass for p in m.predictions] if m.predictions else [np.nan] * len(m.lengths)
        parts.append(pd.DataFrame({
            "run_id": m.run_id, "run": label, "rule": m.rule, "length": list(m.lengths), "samples": m.samples,
            "accuracy": [r.accuracy for r in m.reports], "accuracy_low": [r.accuracy_low for r in m.reports],
            "accuracy_high": [r.accuracy_high for r in m.reports],
            "target_mass": [r.target_mass for r in m.reports], "predicted_mass": predicted}))
    return pd.concat(parts, ignore_index=True)


class DilutionTable(NamedTuple):
    """What the Dilution page draws: ui.charts.common.dilution(table, fit_table, chance) and inverse_mass."""

    table: pd.DataFrame  # a row per length: measured, predicted, and `fitted_mass` where there is a law
    fit_table: pd.DataFrame | None  # length, fitted_mass: L_train to the longest length fitted; None without a law


def dilution_table(m: Measurement) -> DilutionTable:
    """A single-head run's measurement as the Dilution page's table (ui.runs.dilution_data builds the same), with
    the fitted law on a grid where it was fitted. Measured without a prediction, its columns are NaN."""
    reports = [r for r in m.reports if isinstance(r, LengthReport)]
    if len(reports) != len(m.lengths):
        raise ConfigError("the dilution table is a single-head run's: a transformer's measurement has no prediction "
                          "and no law (ui.charts.transformer draws it)")
    predicted = m.predictions or (None,) * len(m.lengths)
    table = pd.DataFrame({
        "length": list(m.lengths), "samples": [r.samples for r in reports], "accuracy": [r.accuracy for r in reports],
        "accuracy_low": [r.accuracy_low for r in reports], "accuracy_high": [r.accuracy_high for r in reports],
        "target_mass": [r.target_mass for r in reports], "target_mass_sem": [r.target_mass_sem for r in reports],
        "predicted_accuracy": [np.nan if p is None else p.accuracy for p in predicted],
        "predicted_mass": [np.nan if p is None else p.target_mass for p in predicted],
        # the ideal vote readout on the same sequences; NaN where the stored numbers predate it
        "vote_accuracy": [np.nan if r.vote_accuracy is None else r.vote_accuracy for r in reports],
    })
    law, fit_table = m.fit.fit, None
    if law is not None:  # drawn only where it was fitted: from the training length to the longest measured length
        grid = np.unique(np.geomspace(m.train_length, law.longest, 64).astype(int))
        fit_table = pd.DataFrame({"length": grid, "fitted_mass": law.target_mass(grid)})
        table["fitted_mass"] = m.fitted_masses
    return DilutionTable(table, fit_table)

"""Sweeps for a script: a grid of runs measured, and its data collapse (lengen.api re-exports these)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from lengen.api.runs import own_store
from lengen.store import PRESET_ROOT, RunStore
from lengen.sweep import (
    SWEEPS_DIR,
    SweepCollapse,
    SweepGrid,
    SweepProgress,
    SweepResult,
    run_sweep,
    stored_sweep,
    sweep_collapse,
)
from lengen_core.config import RunConfig


@dataclass(frozen=True)
class Sweep:
    """A grid of runs measured, and the data collapse of its learned RoPE runs (C6; the Sweeps page's)."""

    result: SweepResult
    collapse: SweepCollapse  # .result: lengen_core's Collapse (None: nothing to collapse), .points, .runs, .note

    @property
    def cells(self) -> list[dict[str, Any]]:
        """One record per cell, in the grid's order: its settings, run id and figures, or its `error`."""
        return self.result.cells

    def table(self) -> pd.DataFrame:
        """One row per cell and length (lengen.sweep.SweepResult.table)."""
        return self.result.table()


def sweep(grid: SweepGrid, *, store: RunStore | None = None, backend: Literal["local", "ray"] = "local",
          workers: int | None = None, address: str | None = None, device: str = "cpu",
          progress: Callable[[SweepProgress], None] | None = None) -> Sweep:
    """The grid's cells, each trained (or taken from the store) and measured (lengen.sweep.run_sweep, the command
    line's and the Sweeps page's), with the collapse. A sweep shipped with the presets, or kept whole in `store`
    (default `$LENGEN_HOME`), is read back and nothing runs; a partial one resumes. `backend` "ray" runs the cells
    as Ray tasks (`address`: a cluster's; none: a local Ray); `workers`: the local pool's processes."""
    mine = own_store(store)
    for root in (mine.root, PRESET_ROOT):
        if (found := stored_sweep(grid, root)) is not None:
            return _swept(found)
    return _swept(run_sweep(grid, mine.root, backend=backend, workers=workers, address=address, device=device,
                            progress=progress, limited=False))


def shipped_sweeps(task: str = "retrieval") -> list[SweepGrid]:
    """The grids of the sweeps shipped with the presets, of `task` (the Sweeps page opens on the retrieval one;
    delay-copy holds the Delays page's data-diversity sweep): `sweep(grid)` reads them back offline."""
    grids = []
    for path in sorted((PRESET_ROOT / SWEEPS_DIR).glob("*/grid.json")):
        grid = SweepGrid.from_dict(json.loads(path.read_text(encoding="utf-8")))
        if dict(grid.base).get("task", RunConfig().task.task) == task:
            grids.append(grid)
    return grids


def _swept(result: SweepResult) -> Sweep:
    return Sweep(result, sweep_collapse(result.cells))

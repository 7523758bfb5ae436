"""The answers about stored runs: `train` (and `construct`, `continue`), `runs`, `delete` and `sweep`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lengen.results.common import field_lines, number, verdict_json
from lengen.runtime import device_name
from lengen.store import RunSummary
from lengen.sweep import SweepResult
from lengen_core.config import RunConfig
from lengen_core.training import Run


@dataclass(frozen=True)
class Trained:
    """`train`, `construct`, `continue`: the run trained here, or the stored one reused."""

    run: Run
    config: RunConfig  # as asked (a run stopped before its steps is stored with the steps it made)
    reused: bool

    def to_json(self) -> dict[str, Any]:
        run = self.run
        return {"run_id": run.run_id, "config": self.config.to_dict(),
                "device": run.training_device,  # where it was trained, also for a stored run loaded here
                # in words where it was trained here; a reused run's GPU may not be this machine's
                "device_name": run.training_device if self.reused else device_name(run.training_device),
                "steps": run.steps, "train_seconds": run.train_seconds, "loss": run.loss,
                "train_accuracy": run.train_accuracy, "stopped_early": run.stopped_early, "reused": self.reused,
                "verdict": verdict_json(run.verdict)}

    def text(self) -> str:
        lines = field_lines(self.to_json(), {"config", "verdict"})
        return "\n".join(lines if self.run.verdict is None else [*lines, f"verdict: {self.run.verdict.reason}"])


@dataclass(frozen=True)
class Listed:
    """One stored run as `runs` lists it; `preset`: from the read-only presets shipped with the lab."""

    summary: RunSummary
    preset: bool

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {"run_id": s.run_id, "preset": self.preset, "encoding": s.config.model.encoding,
                "attention": s.config.model.attention, "task": s.config.task.task, "layers": s.config.model.n_layers,
                "heads": s.config.model.n_heads, "offset": s.config.task.offset,
                "train_length": s.config.task.train_length, "seed": s.config.train.seed, "steps": s.steps,
                "train_accuracy": s.train_accuracy, "created": s.created.isoformat(),
                "verdict": verdict_json(s.verdict)}

    def text(self) -> str:
        verdict = self.summary.verdict
        learned = "" if verdict is None else "  learned" if verdict.learned else "  did not learn"
        return (f"{self.summary.run_id}  steps {self.summary.steps}  acc {self.summary.train_accuracy:.3f}{learned}"
                + ("  (preset, read-only)" if self.preset else ""))


@dataclass(frozen=True)
class Runs:
    """`runs`: the person's runs, then the presets not shadowed by one of them, and the damaged ones."""

    root: Path
    preset_root: Path
    runs: tuple[Listed, ...]
    corrupt: dict[str, str]  # run id -> what is wrong with it

    def to_json(self) -> dict[str, Any]:
        return {"root": str(self.root), "preset_root": str(self.preset_root),
                "runs": [listed.to_json() for listed in self.runs], "corrupt": self.corrupt}

    def text(self) -> str:
        return "\n".join(listed.text() for listed in self.runs) or f"no runs in {self.root}"


@dataclass(frozen=True)
class Deleted:
    """`delete`: the run deleted."""

    run_id: str

    def to_json(self) -> dict[str, Any]:
        return {"deleted": self.run_id}

    def text(self) -> str:
        return f"deleted: {self.run_id}"


@dataclass(frozen=True)
class Swept:
    """`sweep`: every cell (lengen.sweep's rows: settings, run id and numbers, or an error), the data collapse
    (lengen.sweep.collapse_summary) and where the table was written."""

    result: SweepResult
    collapse: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {"sweep_id": r.sweep_id, "backend": r.backend, "cells": r.cells, "ran": r.ran, "trained": r.trained,
                "collapse": self.collapse, "table": str(r.csv_path), "parquet": str(r.parquet_path)}

    def text(self) -> str:
        lines = [_cell_line(cell) for cell in self.result.cells]
        collapse = self.collapse
        lines.append(f"collapse: rms {collapse['rms']:.3f} from the master curve in {collapse['variable']} with the "
                     f"scale fitted (s = {collapse['scale']:,.0f}; {collapse['rms_unscaled']:.3f} without); spread "
                     f"{collapse['spread_scaled']:.3f} in it against {collapse['spread_raw']:.3f} in raw length "
                     f"({collapse['note']})" if collapse["points"] else f"collapse: {collapse['note']}")
        lines.append(f"{self.result.ran} cells run here, {self.result.trained} trained; table: {self.result.csv_path}")
        return "\n".join(lines)


def _cell_line(c: dict[str, Any]) -> str:
    learned = f"{'learned' if c.get('learned') else 'did not learn':>13}"
    return (f"{c['encoding']:>10} {c['attention']:>8} k {c['offset']:>3} L {c['train_length']:>4} "
            f"V {c['vocab_size']:>3} seed {c['seed']:>3}  "
            + (f"error: {c['error']}" if "error" in c else
               f"delays {c['delays']:>6} {learned}  seen {number(c['mean_seen'], '.2f')}  unseen "
               f"{number(c['mean_unseen'], '.2f')}  near unseen {number(c['mean_near_unseen'], '.2f')}  {c['run_id']}"
               if c.get("delays") else
               f"{learned}  m_out {number(c['m_out'], '.2f'):>6}  horizon {number(c['predicted_horizon'], ',')}  "
               f"{c['run_id']}"))

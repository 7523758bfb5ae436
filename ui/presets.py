"""Preset runs shipped in `assets/presets/` (the run store's layout), so the app has charts offline.

Rebuild them with `python -m ui.build_presets`: fixed seeds, default config, so anyone can check
that a rebuilt preset has the same run id (the id is a hash of the config and seed).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from lengen_core.config import RunConfig, with_changes
from lengen_core.serving import store

PRESET_ROOT = store.PRESET_ROOT  # the read-only store of the presets (lengen_core.serving.store.preset_store)
SCIENCE_DOCUMENT = Path(__file__).resolve().parent.parent / "docs" / "science.md"


def science_document() -> str:
    """The lab's science document (docs/science.md, shipped in the image), as markdown."""
    try:
        return SCIENCE_DOCUMENT.read_text(encoding="utf-8")
    except OSError:
        return f"The science document is missing from this installation (expected at `{SCIENCE_DOCUMENT}`)."
PRESET_SEED = 0

# label -> config; the first is selected on a first visit.
PRESETS: dict[str, RunConfig] = {
    "RoPE": with_changes(RunConfig(), encoding="rope", attention="softmax", seed=PRESET_SEED),
    "Learned (APE)": with_changes(RunConfig(), encoding="learned", attention="softmax", seed=PRESET_SEED),
    "RoPE + linear attention": with_changes(RunConfig(), encoding="rope", attention="linear", seed=PRESET_SEED),
    # C8: the same story in a 2-layer, 2-head transformer trained on the full-sequence shift task.
    "Transformer RoPE": with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2, encoding="rope",
                                     seed=PRESET_SEED),
    "Transformer learned": with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2, encoding="learned",
                                        seed=PRESET_SEED),
}
DEFAULT_PRESET = "RoPE"


PRECOMPUTED = PRESET_ROOT / "precomputed"  # <run id>.json: what the first visits compute, shipped (ui.build_presets)
START_LENGTHS, START_SAMPLES = tuple(16 << p for p in range(9)), 128  # the Start page's picture
DILUTION_LONGEST, DILUTION_SAMPLES = 1 << 16, 256  # the Dilution page's default view


def dilution_lengths(config: RunConfig, longest: int = DILUTION_LONGEST) -> tuple[int, ...]:
    """The Dilution page's lengths: k + 1, then the training length doubled, up to `longest`."""
    task = config.task
    return tuple(n for n in sorted({task.offset + 1, *(task.train_length << p for p in range(21))} - {0})
                 if n <= longest)


@functools.cache
def precomputed(run_id: str) -> dict:
    """A preset's shipped results: {"evaluations": {samples: {length: LengthReport fields}},
    "predictions": {length: Prediction fields}}; empty for any other run or a missing file."""
    path = PRECOMPUTED / f"{run_id}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def single_head_presets() -> dict[str, str]:
    """label -> run id of the minimal-head presets (the single-head pages' and Compare's defaults)."""
    return {label: PRESETS[label].run_id() for label in PRESETS if PRESETS[label].model.n_layers == 0}


def transformer_presets() -> dict[str, str]:
    """label -> run id of the multi-layer presets (the Transformer page's)."""
    return {label: PRESETS[label].run_id() for label in PRESETS if PRESETS[label].model.n_layers > 0}


def preset_ids() -> dict[str, str]:
    """label -> run id."""
    return {label: config.run_id() for label, config in PRESETS.items()}

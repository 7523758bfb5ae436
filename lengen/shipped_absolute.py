"""The absolute-position analysis shipped with the transformer presets (scripts/build_presets.py --absolute),
so the Transformer page's section draws a preset on its first visit without the ~4 s of probes:

    found = shipped_absolute(run_id, length, samples)   # None: not shipped, compute it

One JSON file a run, `<run id>.json` under `ABSOLUTE_ROOT`, holding the analysis at each probe length with
the default samples (`lengen_core.analysis.absolute.absolute_to_dict`); about 20 kB a preset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from lengen.store import PRECOMPUTED_ROOT
from lengen_core.analysis.absolute import AbsolutePosition, absolute_from_dict, absolute_to_dict

ABSOLUTE_ROOT = PRECOMPUTED_ROOT / "absolute"


def shipped_path(run_id: str, root: Path = ABSOLUTE_ROOT) -> Path:
    return root / f"{run_id}.json"


def shipped_absolute(run_id: str, length: int, samples: int, root: Path = ABSOLUTE_ROOT) -> AbsolutePosition | None:
    """The shipped analysis of `run_id` at `length` with `samples` sequences, or None (not shipped, other samples)."""
    path = shipped_path(run_id, root)
    if not path.is_file():
        return None
    found = json.loads(path.read_text()).get(str(length))
    if found is None or found["samples"] != samples:
        return None
    return absolute_from_dict(found)


def ship_absolute(run_id: str, results: Mapping[int, AbsolutePosition], root: Path = ABSOLUTE_ROOT) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = shipped_path(run_id, root)
    path.write_text(json.dumps({str(length): absolute_to_dict(found) for length, found in results.items()}))
    return path

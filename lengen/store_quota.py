"""A store's bounds: how large a run of a config will be, whether the store can take it, and the quota
kept by evicting the least recently used runs.

The person's store holds at most `$LENGEN_STORE_QUOTA_MB` (default DEFAULT_QUOTA_MB), all runs
together, first-visit numbers included. A run's last use is its directory's time, set when it is saved,
loaded or downloaded (`RunStore.mark_used`). Eviction happens under the store's lock (lengen.store_writers)
so writers in several processes or replicas count one total: runs are renamed out of sight there and
removed by the caller once the lock is released.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Collection
from pathlib import Path

from lengen import store_writers
from lengen.budget import parameter_count
from lengen.run_files import StoreError, is_run_id
from lengen.runtime import env_whole_number
from lengen_core.config import RunConfig

QUOTA_ENV = "LENGEN_STORE_QUOTA_MB"
DEFAULT_QUOTA_MB = 2_048  # the person's store, all runs together; the least recently used go first
SPACE_MARGIN = 2.0  # a save needs its weights twice over on disk (the temp copy, and headroom)


def quota_bytes() -> int:
    """The person's store quota: `$LENGEN_STORE_QUOTA_MB` megabytes, else DEFAULT_QUOTA_MB."""
    return env_whole_number(QUOTA_ENV, DEFAULT_QUOTA_MB, StoreError, "the store's size limit in whole megabytes") << 20


def weights_bytes(config: RunConfig) -> int:
    """The size of a run's weights file for `config`: its float32 parameters, a table shared by several layers
    once, as it is written once (`budget.parameter_count`; ALiBi's few slopes aside). Counted, not built: a
    model built even on the meta device imports `torch._dynamo` (the meta kernels of its random draws), which
    cost the server 1-2 CPU s at its first Train click."""
    return 4 * parameter_count(config)


def check_room(root: Path, runs_dir: Path, config: RunConfig, quota: int) -> int:
    """Can the store at `root` take a run of `config` within `quota` bytes? Raises `StoreError` saying why not
    (larger than the quota, a folder that cannot be written, not enough disk); returns the weights' size."""
    size = weights_bytes(config)
    if size > quota:
        raise StoreError(f"a run of this config needs {megabytes(size)} for its weights, more than the store's "
                         f"quota of {megabytes(quota)} ({QUOTA_ENV}); use fewer layers, a smaller d_model or, "
                         "for learned positions, a smaller max_positions")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=store_writers.temp_prefix(), dir=runs_dir):
            pass
    except OSError as error:
        raise StoreError(f"the run store {root} cannot be written ({error.strerror or error}); set "
                         "LENGEN_HOME to a writable folder") from error
    free = shutil.disk_usage(runs_dir).free
    if free < SPACE_MARGIN * size:
        raise StoreError(f"the disk of the run store {root} has {megabytes(free)} free; a run of this config "
                         f"needs {megabytes(SPACE_MARGIN * size)} to be saved: free some space or delete runs")
    return size


def run_sizes(runs_dir: Path) -> dict[str, int]:
    """Bytes on disk of each stored run."""
    if not runs_dir.is_dir():
        return {}
    sizes = {}
    for directory in runs_dir.iterdir():
        if directory.is_dir() and is_run_id(directory.name):
            with contextlib.suppress(FileNotFoundError):  # renamed away by another writer meanwhile
                sizes[directory.name] = sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
    return sizes


def evict(runs_dir: Path, quota: int, keep: Collection[str]) -> list[Path]:
    """Under the store's lock: rename the least recently used runs (not in `keep`) out of sight until the
    store is within `quota` bytes; returns where they went (removed by the caller, after the lock is released)."""
    sizes = _sizes_and_uses(runs_dir)
    total = sum(size for size, _ in sizes.values())
    doomed = []
    for run_id in sorted((run_id for run_id in sizes if run_id not in keep), key=lambda run_id: sizes[run_id][1]):
        if total <= quota:
            break
        target = runs_dir / f"{store_writers.temp_prefix()}evict-{run_id}-{uuid.uuid4().hex}"
        with contextlib.suppress(FileNotFoundError):  # removed by hand meanwhile
            os.rename(runs_dir / run_id, target)
            doomed.append(target)
        total -= sizes[run_id][0]
    return doomed


def evicted_id(path: Path) -> str:
    """The run id an evicted run's temp directory (`evict`) was renamed from."""
    return path.name.split("@evict-", 1)[1].rsplit("-", 1)[0]


def megabytes(size: float) -> str:
    return f"{size / (1 << 20):,.0f} MB" if size >= 1 << 20 else f"{size / (1 << 20):.2f} MB"


def _sizes_and_uses(runs_dir: Path) -> dict[str, tuple[int, float]]:
    """Each stored run's bytes and last use (its directory's time); a run vanishing meanwhile is left out."""
    found = {}
    for run_id, size in run_sizes(runs_dir).items():
        with contextlib.suppress(FileNotFoundError):
            found[run_id] = (size, (runs_dir / run_id).stat().st_mtime)
    return found

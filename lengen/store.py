"""The run store: trained runs on disk, one directory per run id, each written in one step.

    <root>/runs/<run_id>/   config.json, weights.safetensors, metrics.json, and first_visit.json or
                            first_visit.pending (lengen.run_files: the files, their format, read back checked)

`<root>` is `$LENGEN_HOME`, else `~/.lengen`. The presets shipped with the lab are a store of their
own, read-only (`preset_store()`, `assets/presets/` beside the package): it can be read like any
other, and `save` and `delete` refuse. A run is written into a `.tmp-*` directory beside the
runs, flushed to disk and renamed into place, so a crash leaves at most a temp directory (which
listing ignores), never half a run. A run damaged after it was written is reported by `corrupt_runs`
and skipped by `list_runs`, so one bad directory cannot hide the rest. A run's first-visit numbers
(lengen.first_visit) are written with it, or added just after it (`add_first_visit`: renamed into place
whole) while a mark says who measures them (`first_visit_pending`).

The parts beside this one: lengen.run_files (one run's directory: its files, written and read back
checked), lengen.store_writers (several processes or replicas writing one store: its lock, temp
directories naming their writer, a dead writer's leftovers) and lengen.store_quota (the bounds: a run's
size, whether the store can take it, eviction of the least recently used runs past the quota).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any

from lengen import run_files, store_quota, store_writers
from lengen.run_files import (
    CONFIG_FILE,
    FIRST_VISIT_FILE,
    FORMAT,
    METRICS_FILE,
    PENDING_FILE,
    WEIGHTS_FILE,
    RunSummary,
    StoreError,
    check_run_id,
)
from lengen.store_quota import DEFAULT_QUOTA_MB, QUOTA_ENV, SPACE_MARGIN, quota_bytes, weights_bytes
from lengen.store_writers import LOCK_FILE, TEMP_PREFIX
from lengen_core.analysis.verdict import judge
from lengen_core.config import RunConfig
from lengen_core.models.initial import initial_model
from lengen_core.training import Run, resolve_device

__all__ = [  # the store's parts are named here too, so callers import them from the store
    "CONFIG_FILE", "DEFAULT_QUOTA_MB", "FIRST_VISIT_FILE", "FORMAT", "LOCK_FILE", "METRICS_FILE", "PENDING_FILE",
    "PENDING_SECONDS", "PRECOMPUTED_ROOT", "PRESET_ROOT", "QUOTA_ENV", "SPACE_MARGIN", "TEMP_PREFIX", "WEIGHTS_FILE",
    "RunStore", "RunSummary", "StoreError", "check_run_id", "default_root", "preset_store", "quota_bytes",
    "weights_bytes",
]

PENDING_SECONDS = 600.0  # another host's measurement (its process cannot be seen from here) is given up after this
PRESET_ROOT = Path(__file__).resolve().parents[1] / "assets" / "presets"
PRECOMPUTED_ROOT = PRESET_ROOT / "precomputed"  # <run id>.json: a preset's first-visit numbers (scripts.build_presets)


def default_root() -> Path:
    """`$LENGEN_HOME` if set, else `~/.lengen`; read at call time so tests can point it elsewhere."""
    home = os.environ.get("LENGEN_HOME")
    return Path(home).expanduser() if home else Path.home() / ".lengen"


def preset_store() -> RunStore:
    """The presets shipped with the lab, read-only."""
    return RunStore(PRESET_ROOT, read_only=True)


class RunStore:
    """One store of runs. `read_only` (the presets) refuses every write; otherwise saves stay within
    `quota` bytes (default `quota_bytes()`) by evicting the least recently used runs."""

    def __init__(self, root: Path | None = None, read_only: bool = False, quota: int | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.runs_dir = self.root / "runs"
        self.read_only = read_only
        self.quota = quota

    def _check_writable(self, action: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot {action}: {self.root} holds the presets shipped with the lab and is read-only "
                             f"(your runs are in {default_root()})")

    def _quota(self) -> int:
        return self.quota if self.quota is not None else quota_bytes()

    def run_dir(self, run_id: str) -> Path:
        """Where `run_id` lives (whether or not it exists); a bad id raises before a path is built."""
        return self.runs_dir / check_run_id(run_id)

    def exists(self, run_id: str) -> bool:
        return self.run_dir(run_id).is_dir()

    def check_can_save(self, config: RunConfig) -> int:
        """Before training: can this store take a run of `config`? Raises `StoreError` saying why not
        (read-only, larger than the quota, not enough disk); returns the weights' size in bytes."""
        self._check_writable(f"save {config.run_id()}")
        return store_quota.check_room(self.root, self.runs_dir, config, self._quota())

    def save(self, run: Run, first_visit: dict[str, Any] | None = None, pending: str | None = None) -> Path:
        """Write `run` atomically, with its `first_visit` numbers (lengen.first_visit) when given,
        or, with `pending` (a token), marked as being measured for them by this process (`add_first_visit`
        puts them in), in the same step. Same id means same config and seed, so a stored copy is kept. Then
        the least recently used other runs are evicted while the store is over its quota (the numbers count too)."""
        self._check_writable(f"save {run.run_id}")
        final = self.run_dir(run.run_id)
        temp = self._write_temp(run, first_visit, pending)
        doomed: list[Path] = []
        try:
            with self._lock():
                try:
                    os.rename(temp, final)
                except OSError:
                    if not final.is_dir():
                        raise
                run_files.fsync_dir(self.runs_dir)  # makes the rename itself durable
                doomed = self._evict(keep={run.run_id})  # counted under the same lock as the rename
        finally:
            shutil.rmtree(temp, ignore_errors=True)  # gone after a successful rename
            store_writers.remove(doomed)
        return final

    def replace(self, run: Run, first_visit: dict[str, Any] | None = None, pending: str | None = None) -> Path:
        """Write `run` (and its `first_visit` numbers or `pending` mark, as `save`) in place of a stored copy of the
        same id (a retraining). Writers of one store take turns: two replacing the same id both succeed, and the
        last one's copy stays whole."""
        self._check_writable(f"save {run.run_id}")
        final = self.run_dir(run.run_id)
        temp = self._write_temp(run, first_visit, pending)
        replaced = self.runs_dir / f"{store_writers.temp_prefix()}replaced-{run.run_id}-{uuid.uuid4().hex}"
        doomed: list[Path] = [replaced]
        try:
            with self._lock():
                if final.is_dir():
                    os.rename(final, replaced)
                os.rename(temp, final)
                run_files.fsync_dir(self.runs_dir)
                doomed += self._evict(keep={run.run_id})
        finally:
            shutil.rmtree(temp, ignore_errors=True)
            store_writers.remove(doomed)
        return final

    def _write_temp(self, run: Run, first_visit: dict[str, Any] | None = None, pending: str | None = None) -> Path:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=store_writers.temp_prefix(), dir=self.runs_dir))
        try:
            _write_run(temp, run, first_visit, pending)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        return temp

    def _lock(self) -> contextlib.AbstractContextManager[None]:
        """The store's exclusive lock (lengen.store_writers.lock): renames in and out, and the quota's count."""
        return store_writers.lock(self.runs_dir)

    def load(self, run_id: str, device: str = "cpu") -> Run:
        """Rebuild the model from its config, load the weights (checked against the sha256 recorded
        when they were saved), and put it in eval mode on `device`.

        The returned `Run.device` is where the model now is; `Run.trained_on`, the device it was trained
        on (metrics.json's `device`).
        """
        directory = self._existing(run_id)
        summary, fields, digest = run_files.read_record(directory)
        model = initial_model(summary.config)  # the architecture; its weights are replaced below
        run_files.load_weights(directory, model, digest)
        target = resolve_device(device)
        model = model.eval().to(target)
        verdict = summary.verdict if summary.verdict is not None else judge(model, summary.config)
        self.mark_used(run_id)
        return Run(config=summary.config, model=model, **{**fields, "device": str(target)}, verdict=verdict,
                   trained_on=fields["device"])

    def first_visit(self, run_id: str) -> dict[str, Any] | None:
        """The run's stored first-visit numbers (lengen.first_visit.to_dict), or None: a run saved
        without them, or a file that cannot be read (the pages then measure the run, as for an old run)."""
        path = self.run_dir(run_id) / FIRST_VISIT_FILE
        if self.root == PRESET_ROOT and not path.exists():  # the presets ship theirs beside the runs
            path = PRECOMPUTED_ROOT / f"{run_id}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def first_visit_pending(self, run_id: str) -> bool:
        """Whether the run's first-visit numbers are being measured now (saved with `pending`, not yet added):
        a page may wait for them rather than measure the same numbers again. False once they are in, when
        the measuring process is gone (killed: the pages then measure the run), or for a run saved without."""
        return store_writers.claim_alive(self.run_dir(run_id) / PENDING_FILE, PENDING_SECONDS)

    def add_first_visit(self, run_id: str, token: str, first_visit: dict[str, Any] | None) -> bool:
        """Put the `first_visit` numbers beside a run saved with `pending=token` (atomically: a reader sees the
        whole file or none) and clear its mark; None clears the mark alone (the measurement failed). False,
        writing nothing, when the stored run is no longer the one marked (replaced, deleted or evicted since)."""
        self._check_writable(f"add numbers to {run_id}")
        directory = self.run_dir(run_id)
        doomed: list[Path] = []
        with self._lock():  # a replace, delete or eviction renames the directory under the same lock
            try:
                if json.loads((directory / PENDING_FILE).read_text(encoding="utf-8")).get("token") != token:
                    return False
            except (OSError, ValueError, AttributeError):
                return False
            if first_visit is not None:
                temp = directory / f"{TEMP_PREFIX}{FIRST_VISIT_FILE}"
                run_files.write_json(temp, first_visit)
                temp.chmod(0o644)
                os.replace(temp, directory / FIRST_VISIT_FILE)
            (directory / PENDING_FILE).unlink()
            run_files.fsync_dir(directory)
            doomed = self._evict(keep={run_id})  # the numbers count in the quota
        store_writers.remove(doomed)
        return True

    def mark_used(self, run_id: str) -> None:
        """Record a use of the run (a load, a download) for the quota's eviction order: the least
        recently used go first. A read-only store (the presets) is never written, not even this."""
        if not self.read_only:
            with contextlib.suppress(OSError):
                os.utime(self.run_dir(run_id))

    def find(self, config: RunConfig, device: str = "cpu") -> Run | None:
        """The stored run for exactly this config and seed, or None: lets callers skip retraining.

        A damaged stored copy raises `StoreError` (naming the file) rather than passing for absent,
        since `save` would keep that copy and retraining could never replace it; `delete` it first.
        """
        run_id = config.run_id()
        return self.load(run_id, device) if self.exists(run_id) else None

    def list_runs(self) -> list[RunSummary]:
        """Readable runs, newest first; damaged ones are left out (see `corrupt_runs`)."""
        return self._scan()[0]

    def corrupt_runs(self) -> dict[str, str]:
        """Damaged runs by id, each with a message naming the file at fault."""
        return self._scan()[1]

    def delete(self, run_id: str) -> None:
        """Rename the run out of sight before removing it, so a crash mid-delete leaves no half run."""
        self._check_writable(f"delete {run_id}")
        directory = self._existing(run_id)  # checks the id before any path is touched
        doomed = self.runs_dir / f"{store_writers.temp_prefix()}delete-{run_id}-{uuid.uuid4().hex}"
        with self._lock():
            try:
                os.rename(directory, doomed)
            except FileNotFoundError:  # another writer deleted it since
                raise StoreError(f"no run named {run_id} in {self.root}") from None
        shutil.rmtree(doomed)

    def size(self) -> dict[str, int]:
        """Bytes on disk of each stored run."""
        return store_quota.run_sizes(self.runs_dir)

    def enforce_quota(self, keep: Collection[str] = frozenset()) -> list[str]:
        """Delete the least recently used runs (not in `keep`) while the store is over its quota;
        returns their ids. Last use is a run directory's time, set when it is saved or loaded. The
        count and the renames out happen under the store's lock, so writers in several processes
        (or replicas) see one total."""
        if self.read_only:
            return []
        with self._lock():
            doomed = self._evict(keep)
        store_writers.remove(doomed)
        return [store_quota.evicted_id(path) for path in doomed]

    def _evict(self, keep: Collection[str]) -> list[Path]:
        """Under the lock: the least recently used runs renamed out of sight while over the quota (store_quota.evict)."""
        return store_quota.evict(self.runs_dir, self._quota(), keep)

    def clean_partial(self, older_than_seconds: float = 3600.0) -> list[str]:
        """Remove leftover temp directories: those of a process of this host that is gone at once, others
        (another host's, whose processes cannot be seen from here, or from an older version without a
        host) once older than `older_than_seconds`."""
        return store_writers.clean_partial(self.runs_dir, older_than_seconds)

    def _existing(self, run_id: str) -> Path:
        directory = self.run_dir(run_id)
        if not directory.is_dir():
            raise StoreError(f"no run named {run_id} in {self.root}")
        return directory

    def _scan(self) -> tuple[list[RunSummary], dict[str, str]]:
        return run_files.scan(self.runs_dir)

def _write_run(directory: Path, run: Run, first_visit: dict[str, Any] | None = None,
               pending: str | None = None) -> None:
    """The run's files in `directory` (lengen.run_files.write_run), with its first-visit numbers or, with a
    `pending` token, the mark naming this process as the one measuring them (read by `first_visit_pending`)."""
    run_files.write_run(directory, run, first_visit, None if pending is None else store_writers.claim(pending))

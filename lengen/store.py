"""The run store: trained runs on disk, one directory per run id, each written in one step.

    <root>/runs/<run_id>/config.json          RunConfig.to_dict() (read by RunConfig.from_stored: a setting
                                              added since it was written reads as its legacy value)
                         weights.safetensors  the model's state_dict (safetensors: loading runs no code)
                         metrics.json         what happened in training and the verdict on it
                                              (lengen_core.analysis.verdict), a format number, the time saved
                         first_visit.json     optional: what the pages show first, measured where the training
                                              ended (lengen.first_visit), added just after the run
                                              (`add_first_visit`: renamed into place whole) or written with it
                         first_visit.pending  while those numbers are measured: who measures them
                                              (`first_visit_pending`); removed as they are added

`<root>` is `$LENGEN_HOME`, else `~/.lengen`. The presets shipped with the lab are a store of their
own, read-only (`preset_store()`, `assets/presets/` beside the package): it can be read like any
other, and `save` and `delete` refuse. A run is written into a `.tmp-*` directory beside the
runs, flushed to disk and renamed into place, so a crash leaves at most a temp directory (which
listing ignores), never half a run. Run ids are checked against a strict pattern before any path
is built from them, so no id can name a path outside the store. A run damaged after it was written
is reported by `corrupt_runs` and skipped by `list_runs`, so one bad directory cannot hide the rest.

Several processes, on one machine or on several (app replicas sharing `LENGEN_HOME` on a shared
volume), may write one store at once. Every rename into or out of the runs directory, and the quota's
count and eviction, happen under one exclusive `fcntl.flock` on `runs/.lock`; a run of one id is
written once (the first rename wins, later copies are dropped); a temp directory names its writer's
host and process, so a cleaner removes at once only what a dead process *of its own host* left
(another host's processes cannot be seen from here: theirs go by age). The volume must give
`flock` across its clients and an atomic `rename` within one directory (docs/scale.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from lengen_core.analysis.verdict import Verdict, judge
from lengen_core.config import RunConfig
from lengen_core.models.initial import initial_model
from lengen.budget import parameter_count
from lengen.runtime import env_whole_number
from lengen_core.training import Run, resolve_device

FORMAT = 1  # of metrics.json; bump when the layout changes so old readers refuse new runs clearly
TEMP_PREFIX = ".tmp-"
CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE = "config.json", "weights.safetensors", "metrics.json"
FIRST_VISIT_FILE = "first_visit.json"  # lengen.first_visit's numbers, when the run was saved with them
# Beside a run saved before its first-visit numbers: who is measuring them (token, pid, host). Gone once they are in.
PENDING_FILE = "first_visit.pending"
PENDING_SECONDS = 600.0  # another host's measurement (its process cannot be seen from here) is given up after this
_RUN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
PRESET_ROOT = Path(__file__).resolve().parents[1] / "assets" / "presets"
PRECOMPUTED_ROOT = PRESET_ROOT / "precomputed"  # <run id>.json: a preset's first-visit numbers (scripts.build_presets)
LOCK_FILE = ".lock"  # in the runs directory: writers of the same store take turns to rename runs in and out
QUOTA_ENV = "LENGEN_STORE_QUOTA_MB"
DEFAULT_QUOTA_MB = 2_048  # the person's store, all runs together; the least recently used go first
SPACE_MARGIN = 2.0  # a save needs its weights twice over on disk (the temp copy, and headroom)
# What damage looks like when a record is parsed: a wrong type, a number beyond a float ("1e400" steps),
# JSON nested deeper than the parser's stack.
_DAMAGE = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, RecursionError)
_RUN_FIELDS = ("device", "steps", "train_seconds", "loss", "train_accuracy", "stopped_early", "history")


class StoreError(ValueError):
    """A run id is not allowed, or a stored run is missing or damaged; the message says which."""


@dataclass(frozen=True)
class RunSummary:
    """What listing shows about a run without loading its weights."""

    run_id: str
    config: RunConfig
    steps: int
    train_accuracy: float
    created: datetime  # timezone-aware, UTC when saved here
    verdict: Verdict | None  # None for a run saved before verdicts were stored (judged when loaded)


def default_root() -> Path:
    """`$LENGEN_HOME` if set, else `~/.lengen`; read at call time so tests can point it elsewhere."""
    home = os.environ.get("LENGEN_HOME")
    return Path(home).expanduser() if home else Path.home() / ".lengen"


def preset_store() -> RunStore:
    """The presets shipped with the lab, read-only."""
    return RunStore(PRESET_ROOT, read_only=True)


def check_run_id(run_id: object) -> str:
    """Return `run_id` if it is safe as a directory name, else raise `StoreError`.

    The pattern has no separators and must start with a letter or digit; with `..` excluded as
    well, an id can neither climb out of the runs directory nor collide with a `.tmp-*` directory.
    """
    if not _is_run_id(run_id):
        raise StoreError(
            f"invalid run id {run_id!r}: use 1 to 128 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..'"
        )
    return run_id


def quota_bytes() -> int:
    """The person's store quota: `$LENGEN_STORE_QUOTA_MB` megabytes, else DEFAULT_QUOTA_MB."""
    return env_whole_number(QUOTA_ENV, DEFAULT_QUOTA_MB, StoreError, "the store's size limit in whole megabytes") << 20


def weights_bytes(config: RunConfig) -> int:
    """The size of a run's weights file for `config`: its float32 parameters, a table shared by several layers
    once, as it is written once (`budget.parameter_count`; ALiBi's few slopes aside). Counted, not built: a
    model built even on the meta device imports `torch._dynamo` (the meta kernels of its random draws), which
    cost the server 1-2 CPU s at its first Train click."""
    return 4 * parameter_count(config)


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
        size = weights_bytes(config)
        quota = self._quota()
        if size > quota:
            raise StoreError(f"a run of this config needs {_megabytes(size)} for its weights, more than the store's "
                             f"quota of {_megabytes(quota)} ({QUOTA_ENV}); use fewer layers, a smaller d_model or, "
                             "for learned positions, a smaller max_positions")
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(prefix=_temp_prefix(), dir=self.runs_dir):
                pass
        except OSError as error:
            raise StoreError(f"the run store {self.root} cannot be written ({error.strerror or error}); set "
                             "LENGEN_HOME to a writable folder") from error
        free = shutil.disk_usage(self.runs_dir).free
        if free < SPACE_MARGIN * size:
            raise StoreError(f"the disk of the run store {self.root} has {_megabytes(free)} free; a run of this config "
                             f"needs {_megabytes(SPACE_MARGIN * size)} to be saved: free some space or delete runs")
        return size

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
                _fsync_dir(self.runs_dir)  # makes the rename itself durable
                doomed = self._evict(keep={run.run_id})  # counted under the same lock as the rename
        finally:
            shutil.rmtree(temp, ignore_errors=True)  # gone after a successful rename
            _remove(doomed)
        return final

    def replace(self, run: Run, first_visit: dict[str, Any] | None = None, pending: str | None = None) -> Path:
        """Write `run` (and its `first_visit` numbers or `pending` mark, as `save`) in place of a stored copy of the
        same id (a retraining). Writers of one store take turns: two replacing the same id both succeed, and the
        last one's copy stays whole."""
        self._check_writable(f"save {run.run_id}")
        final = self.run_dir(run.run_id)
        temp = self._write_temp(run, first_visit, pending)
        replaced = self.runs_dir / f"{_temp_prefix()}replaced-{run.run_id}-{uuid.uuid4().hex}"
        doomed: list[Path] = [replaced]
        try:
            with self._lock():
                if final.is_dir():
                    os.rename(final, replaced)
                os.rename(temp, final)
                _fsync_dir(self.runs_dir)
                doomed += self._evict(keep={run.run_id})
        finally:
            shutil.rmtree(temp, ignore_errors=True)
            _remove(doomed)
        return final

    def _write_temp(self, run: Run, first_visit: dict[str, Any] | None = None, pending: str | None = None) -> Path:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=_temp_prefix(), dir=self.runs_dir))
        try:
            _write_run(temp, run, first_visit, pending)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        return temp

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """An exclusive lock on this store's runs directory (POSIX; elsewhere, none)."""
        if os.name != "posix":
            yield
            return
        import fcntl

        self.runs_dir.mkdir(parents=True, exist_ok=True)
        with open(self.runs_dir / LOCK_FILE, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def load(self, run_id: str, device: str = "cpu") -> Run:
        """Rebuild the model from its config, load the weights (checked against the sha256 recorded
        when they were saved), and put it in eval mode on `device`.

        The returned `Run.device` is where the model now is; `Run.trained_on`, the device it was trained
        on (metrics.json's `device`).
        """
        directory = self._existing(run_id)
        summary, fields, digest = _read_record(directory)
        model = initial_model(summary.config)  # the architecture; its weights are replaced below
        weights_path = directory / WEIGHTS_FILE
        if digest is not None and _sha256(weights_path) != digest:
            raise StoreError(f"damaged weights file {weights_path}: its sha256 differs from the one recorded when it "
                             "was saved; delete the run and train it again")
        try:
            model.load_state_dict(_with_aliases(load_file(weights_path), model))
        except (OSError, RuntimeError, SafetensorError) as error:
            raise StoreError(f"damaged weights file {weights_path}: {error}") from error
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
        marker = self.run_dir(run_id) / PENDING_FILE
        try:
            owner = json.loads(marker.read_text(encoding="utf-8"))
            if owner.get("host") != _host():
                return time.time() - marker.stat().st_mtime < PENDING_SECONDS
            return _alive(int(owner["pid"]))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return False

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
                _write_json(temp, first_visit)
                temp.chmod(0o644)
                os.replace(temp, directory / FIRST_VISIT_FILE)
            (directory / PENDING_FILE).unlink()
            _fsync_dir(directory)
            doomed = self._evict(keep={run_id})  # the numbers count in the quota
        _remove(doomed)
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
        doomed = self.runs_dir / f"{_temp_prefix()}delete-{run_id}-{uuid.uuid4().hex}"
        with self._lock():
            try:
                os.rename(directory, doomed)
            except FileNotFoundError:  # another writer deleted it since
                raise StoreError(f"no run named {run_id} in {self.root}") from None
        shutil.rmtree(doomed)

    def size(self) -> dict[str, int]:
        """Bytes on disk of each stored run."""
        if not self.runs_dir.is_dir():
            return {}
        sizes = {}
        for directory in self.runs_dir.iterdir():
            if directory.is_dir() and _is_run_id(directory.name):
                with contextlib.suppress(FileNotFoundError):  # renamed away by another writer meanwhile
                    sizes[directory.name] = sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
        return sizes

    def enforce_quota(self, keep: set[str] = frozenset()) -> list[str]:
        """Delete the least recently used runs (not in `keep`) while the store is over its quota;
        returns their ids. Last use is a run directory's time, set when it is saved or loaded. The
        count and the renames out happen under the store's lock, so writers in several processes
        (or replicas) see one total."""
        if self.read_only:
            return []
        with self._lock():
            doomed = self._evict(keep)
        _remove(doomed)
        return [_evicted_id(path) for path in doomed]

    def _evict(self, keep: set[str]) -> list[Path]:
        """Under the lock: rename the least recently used runs out of sight until the store is within its
        quota; returns where they went (removed by the caller, after the lock is released)."""
        sizes = self._sizes_on_disk()
        total, quota = sum(size for size, _ in sizes.values()), self._quota()
        doomed = []
        for run_id in sorted((run_id for run_id in sizes if run_id not in keep), key=lambda run_id: sizes[run_id][1]):
            if total <= quota:
                break
            target = self.runs_dir / f"{_temp_prefix()}evict-{run_id}-{uuid.uuid4().hex}"
            with contextlib.suppress(FileNotFoundError):  # removed by hand meanwhile
                os.rename(self.runs_dir / run_id, target)
                doomed.append(target)
            total -= sizes[run_id][0]
        return doomed

    def _sizes_on_disk(self) -> dict[str, tuple[int, float]]:
        """Each stored run's bytes and last use (its directory's time); a run vanishing meanwhile is left out."""
        found = {}
        for run_id, size in self.size().items():
            with contextlib.suppress(FileNotFoundError):
                found[run_id] = (size, self.run_dir(run_id).stat().st_mtime)
        return found

    def clean_partial(self, older_than_seconds: float = 3600.0) -> list[str]:
        """Remove leftover temp directories: those of a process of this host that is gone at once, others
        (another host's, whose processes cannot be seen from here, or from an older version without a
        host) once older than `older_than_seconds`."""
        if not self.runs_dir.is_dir():
            return []
        cutoff = time.time() - older_than_seconds
        removed = []
        for path in sorted(self.runs_dir.iterdir()):
            if not (path.name.startswith(TEMP_PREFIX) and path.is_dir()):
                continue
            owner = _temp_owner(path.name)
            try:
                old = path.stat().st_mtime <= cutoff
            except FileNotFoundError:  # renamed into place or removed by its writer meanwhile
                continue
            if (owner is not None and not _alive(owner)) or (owner is None and old):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path.name)
        return removed

    def _existing(self, run_id: str) -> Path:
        directory = self.run_dir(run_id)
        if not directory.is_dir():
            raise StoreError(f"no run named {run_id} in {self.root}")
        return directory

    def _scan(self) -> tuple[list[RunSummary], dict[str, str]]:
        summaries: list[RunSummary] = []
        corrupt: dict[str, str] = {}
        if not self.runs_dir.is_dir():
            return summaries, corrupt
        for directory in sorted(self.runs_dir.iterdir()):
            if not directory.is_dir() or not _is_run_id(directory.name):
                continue  # temp directories and anything else not written by `save`
            try:
                summary, _, _ = _read_record(directory)
                _check_weights(directory / WEIGHTS_FILE)
            except Exception as error:  # noqa: BLE001 — one bad folder must never hide the others
                if not directory.is_dir():
                    continue  # deleted or evicted by another writer while it was read: gone, not damaged
                corrupt[directory.name] = (str(error) if isinstance(error, StoreError)
                                           else f"unreadable run {directory}: {error!r}")
            else:
                summaries.append(summary)
        summaries.sort(key=lambda summary: summary.created, reverse=True)  # stable: ties stay by id
        return summaries, corrupt


def _megabytes(size: float) -> str:
    return f"{size / (1 << 20):,.0f} MB" if size >= 1 << 20 else f"{size / (1 << 20):.2f} MB"


def _host() -> str:
    """This machine (or container) as it names itself, in characters safe in a file name."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", os.uname().nodename)[:64] or "unknown"  # the host name, without a socket


def _temp_prefix() -> str:
    """Temp directories carry their writer's process id and host, so a leftover of a killed writer on
    this host is known, and another host's writer (another replica) is never taken for a dead one."""
    return f"{TEMP_PREFIX}{os.getpid()}@{_host()}@"


def _temp_owner(name: str) -> int | None:
    """The process id of a temp directory's writer when it ran on this host, else None (another host's,
    or an older version's name without a host)."""
    match = re.fullmatch(re.escape(TEMP_PREFIX) + r"(\d{1,10})@([A-Za-z0-9._-]{1,64})@.*", name)
    return int(match.group(1)) if match and match.group(2) == _host() else None


def _evicted_id(path: Path) -> str:
    return path.name.split("@evict-", 1)[1].rsplit("-", 1)[0]


def _remove(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except OSError as error:
        raise StoreError(f"damaged weights file {path}: {error}") from error
    return digest.hexdigest()


def _storage_key(tensor: torch.Tensor) -> tuple:
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()))


def _unique_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tensor once: a table shared by several layers (a transformer's learned
    positions) is written under its first name only; `_with_aliases` restores the others on load."""
    seen: set[tuple] = set()
    unique = {}
    for name, tensor in model.state_dict().items():
        key = _storage_key(tensor)
        if key not in seen:
            seen.add(key)
            unique[name] = tensor.detach().cpu().contiguous()
    return unique


def _with_aliases(weights: dict[str, torch.Tensor], model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """`weights` with every name of `model` that shares a tensor with a stored name filled from it
    (files written before tables were stored once have every name already)."""
    groups: dict[tuple, list[str]] = {}
    for name, tensor in model.state_dict().items():
        groups.setdefault(_storage_key(tensor), []).append(name)
    full = dict(weights)
    for names in groups.values():
        stored = next((name for name in names if name in weights), None)
        for name in names:
            if stored is not None and name not in full:
                full[name] = weights[stored]
    return full


def _is_run_id(name: object) -> TypeGuard[str]:
    return isinstance(name, str) and _RUN_ID.fullmatch(name) is not None and ".." not in name


def _write_run(directory: Path, run: Run, first_visit: dict[str, Any] | None = None,
               pending: str | None = None) -> None:
    weights_path = directory / WEIGHTS_FILE
    save_file(_unique_state(run.model), weights_path)
    _fsync_file(weights_path)
    created = datetime.now(UTC).isoformat()
    metrics = {"format": FORMAT, "created": created, "weights_sha256": _sha256(weights_path),
               **{name: getattr(run, name) for name in _RUN_FIELDS}, "device": run.training_device}
    if run.verdict is not None:
        metrics["verdict"] = run.verdict.to_dict()
    _write_json(directory / CONFIG_FILE, run.config.to_dict())
    _write_json(directory / METRICS_FILE, metrics)
    names = [WEIGHTS_FILE, CONFIG_FILE, METRICS_FILE]
    if first_visit is not None:
        _write_json(directory / FIRST_VISIT_FILE, first_visit)
        names.append(FIRST_VISIT_FILE)
    elif pending is not None:
        _write_json(directory / PENDING_FILE, {"token": pending, "pid": os.getpid(), "host": _host()})
        names.append(PENDING_FILE)
    # mkdtemp and safetensors create owner-only modes; a stored run (and a shipped preset) is for
    # every local user to read, e.g. the container's non-root user reading presets copied as root.
    for name in names:
        (directory / name).chmod(0o644)
    directory.chmod(0o755)
    _fsync_dir(directory)


def _read_record(directory: Path) -> tuple[RunSummary, dict[str, Any], str | None]:
    """The summary, the `Run` fields and the recorded sha256 of the weights (None for a run saved
    before it was recorded) of a stored run, checked; `StoreError` names the bad file."""
    config_path, metrics_path = directory / CONFIG_FILE, directory / METRICS_FILE
    try:
        config = RunConfig.from_stored(_read_json(config_path))  # a setting added since: its legacy value
    except _DAMAGE as error:
        raise StoreError(f"invalid run config in {config_path}: {error}") from error
    if config.run_id() != directory.name:
        raise StoreError(f"{config_path} describes run {config.run_id()}, not {directory.name}")
    metrics = _read_json(metrics_path)
    if not isinstance(metrics, dict) or metrics.get("format") != FORMAT:
        found = metrics.get("format") if isinstance(metrics, dict) else None
        raise StoreError(f"{metrics_path} has format {found!r}; this version reads format {FORMAT}")
    try:
        fields = {
            "device": str(metrics["device"]),
            "steps": int(metrics["steps"]),
            "train_seconds": float(metrics["train_seconds"]),
            "loss": float(metrics["loss"]),
            "train_accuracy": float(metrics["train_accuracy"]),
            "stopped_early": bool(metrics["stopped_early"]),
            "history": {str(key): list(values) for key, values in metrics["history"].items()},
        }
        created = datetime.fromisoformat(metrics["created"])
        verdict = Verdict.from_dict(metrics["verdict"]) if "verdict" in metrics else None
        digest = metrics.get("weights_sha256")
        if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise ValueError(f"weights_sha256 {str(digest)[:80]!r} is not a sha256 in hex")
    except _DAMAGE as error:
        raise StoreError(f"missing or invalid field in {metrics_path}: {error!r}") from error
    if created.tzinfo is None:  # only a hand-edited file; naive and aware times cannot be sorted together
        created = created.replace(tzinfo=UTC)
    summary = RunSummary(directory.name, config, fields["steps"], fields["train_accuracy"], created, verdict)
    return summary, fields, digest


def _check_weights(path: Path) -> None:
    """Read only the header, which catches a missing, truncated or foreign file without the tensors."""
    try:
        with safe_open(path, framework="pt") as weights:
            weights.keys()
    except (OSError, SafetensorError) as error:
        raise StoreError(f"damaged weights file {path}: {error}") from error


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # bad UTF-8, bad JSON, nesting past the parser's stack
        raise StoreError(f"unreadable {path}: {error}") from error


def _write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=2)
        file.flush()
        os.fsync(file.fileno())


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as file:
        os.fsync(file.fileno())


def _fsync_dir(path: Path) -> None:
    """Persist directory entries (new files, a rename); POSIX only, Windows cannot open directories."""
    if os.name != "posix":
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

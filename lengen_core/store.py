"""The run store: trained runs on disk, one directory per run id, each written in one step.

    <root>/runs/<run_id>/config.json          RunConfig.to_dict()
                         weights.safetensors  the model's state_dict (safetensors: loading runs no code)
                         metrics.json         what happened in training and the verdict on it
                                              (lengen_core.verdict), a format number, the time saved

`<root>` is `$LENGEN_HOME`, else `~/.lengen`. The presets shipped with the lab are a store of their
own, read-only (`preset_store()`, `assets/presets/` beside the package): it can be read like any
other, and `save` and `delete` refuse. A run is written into a `.tmp-*` directory beside the
runs, flushed to disk and renamed into place, so a crash leaves at most a temp directory (which
listing ignores), never half a run. Run ids are checked against a strict pattern before any path
is built from them, so no id can name a path outside the store. A run damaged after it was written
is reported by `corrupt_runs` and skipped by `list_runs`, so one bad directory cannot hide the rest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from lengen_core.config import RunConfig
from lengen_core.training import Run, initial_model, resolve_device
from lengen_core.verdict import Verdict, judge

FORMAT = 1  # of metrics.json; bump when the layout changes so old readers refuse new runs clearly
TEMP_PREFIX = ".tmp-"
CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE = "config.json", "weights.safetensors", "metrics.json"
_RUN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
PRESET_ROOT = Path(__file__).resolve().parent.parent / "assets" / "presets"
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


class RunStore:
    def __init__(self, root: Path | None = None, read_only: bool = False) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.runs_dir = self.root / "runs"
        self.read_only = read_only

    def _check_writable(self, action: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot {action}: {self.root} holds the presets shipped with the lab and is read-only "
                             f"(your runs are in {default_root()})")

    def run_dir(self, run_id: str) -> Path:
        """Where `run_id` lives (whether or not it exists); a bad id raises before a path is built."""
        return self.runs_dir / check_run_id(run_id)

    def exists(self, run_id: str) -> bool:
        return self.run_dir(run_id).is_dir()

    def save(self, run: Run) -> Path:
        """Write `run` atomically. Same id means same config and seed, so a stored copy is kept."""
        self._check_writable(f"save {run.run_id}")
        final = self.run_dir(run.run_id)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.runs_dir))
        try:
            _write_run(temp, run)
            try:
                os.rename(temp, final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(temp, ignore_errors=True)  # gone after a successful rename
        _fsync_dir(self.runs_dir)  # makes the rename itself durable
        return final

    def load(self, run_id: str, device: str = "cpu") -> Run:
        """Rebuild the model from its config, load the weights, and put it in eval mode on `device`.

        The returned `Run.device` is where the model now is; the training device is in metrics.json.
        """
        directory = self._existing(run_id)
        summary, fields = _read_record(directory)
        model = initial_model(summary.config)  # the architecture; its weights are replaced below
        weights_path = directory / WEIGHTS_FILE
        try:
            model.load_state_dict(load_file(weights_path))
        except (OSError, RuntimeError, SafetensorError) as error:
            raise StoreError(f"damaged weights file {weights_path}: {error}") from error
        target = resolve_device(device)
        model = model.eval().to(target)
        verdict = summary.verdict if summary.verdict is not None else judge(model, summary.config)
        return Run(config=summary.config, model=model, **{**fields, "device": str(target)}, verdict=verdict)

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
        directory = self._existing(run_id)
        doomed = self.runs_dir / f"{TEMP_PREFIX}delete-{run_id}-{uuid.uuid4().hex}"
        os.rename(directory, doomed)
        shutil.rmtree(doomed)

    def clean_partial(self, older_than_seconds: float = 3600.0) -> list[str]:
        """Remove leftover `.tmp-*` directories; young ones may belong to a save still in progress."""
        if not self.runs_dir.is_dir():
            return []
        cutoff = time.time() - older_than_seconds
        removed = []
        for path in sorted(self.runs_dir.iterdir()):
            if path.name.startswith(TEMP_PREFIX) and path.is_dir() and path.stat().st_mtime <= cutoff:
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
                summary, _ = _read_record(directory)
                _check_weights(directory / WEIGHTS_FILE)
            except StoreError as error:
                corrupt[directory.name] = str(error)
            else:
                summaries.append(summary)
        summaries.sort(key=lambda summary: summary.created, reverse=True)  # stable: ties stay by id
        return summaries, corrupt


def _is_run_id(name: object) -> TypeGuard[str]:
    return isinstance(name, str) and _RUN_ID.fullmatch(name) is not None and ".." not in name


def _write_run(directory: Path, run: Run) -> None:
    # clone: a transformer's blocks share the learned position table, and safetensors refuses tensors
    # that share memory; each name gets its own copy, and loading writes them all back into one table
    weights = {name: tensor.detach().cpu().clone().contiguous() for name, tensor in run.model.state_dict().items()}
    save_file(weights, directory / WEIGHTS_FILE)
    _fsync_file(directory / WEIGHTS_FILE)
    created = datetime.now(UTC).isoformat()
    metrics = {"format": FORMAT, "created": created, **{name: getattr(run, name) for name in _RUN_FIELDS}}
    if run.verdict is not None:
        metrics["verdict"] = run.verdict.to_dict()
    _write_json(directory / CONFIG_FILE, run.config.to_dict())
    _write_json(directory / METRICS_FILE, metrics)
    # mkdtemp and safetensors create owner-only modes; a stored run (and a shipped preset) is for
    # every local user to read, e.g. the container's non-root user reading presets copied as root.
    for name in (WEIGHTS_FILE, CONFIG_FILE, METRICS_FILE):
        (directory / name).chmod(0o644)
    directory.chmod(0o755)
    _fsync_dir(directory)


def _read_record(directory: Path) -> tuple[RunSummary, dict[str, Any]]:
    """The summary and the `Run` fields of a stored run, checked; `StoreError` names the bad file."""
    config_path, metrics_path = directory / CONFIG_FILE, directory / METRICS_FILE
    try:
        config = RunConfig.from_dict(_read_json(config_path))
    except (TypeError, ValueError) as error:
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
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise StoreError(f"missing or invalid field in {metrics_path}: {error!r}") from error
    if created.tzinfo is None:  # only a hand-edited file; naive and aware times cannot be sorted together
        created = created.replace(tzinfo=UTC)
    summary = RunSummary(directory.name, config, fields["steps"], fields["train_accuracy"], created, verdict)
    return summary, fields


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
    except (OSError, ValueError) as error:  # ValueError covers bad UTF-8 and bad JSON
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

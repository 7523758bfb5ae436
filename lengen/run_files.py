"""One run's directory: the files a run is written as, and reading them back checked.

    <run_id>/config.json          RunConfig.to_dict() (read by RunConfig.from_stored: a setting added since it
                                  was written reads as its legacy value)
             weights.safetensors  the model's state_dict (safetensors: loading runs no code), a table shared
                                  by several layers once
             metrics.json         what happened in training and the verdict on it (lengen_core.analysis.verdict),
                                  a format number, the time saved, the weights' sha256
             first_visit.json     optional: what the pages show first (lengen.first_visit)
             first_visit.pending  optional, while those numbers are measured: who measures them

A run id is checked against a strict pattern before any path is built from it, so no id can name a path
outside the runs directory. Reading a record checks every field, and `StoreError` names the file at
fault: a damaged run is reported, never taken for a good one. Where the directory lives, how it is
renamed into place and what the store may hold are lengen.store's, lengen.store_writers' and
lengen.store_quota's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from lengen_core.analysis.verdict import Verdict
from lengen_core.config import RunConfig
from lengen_core.training import Run

FORMAT = 1  # of metrics.json; bump when the layout changes so old readers refuse new runs clearly
CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE = "config.json", "weights.safetensors", "metrics.json"
FIRST_VISIT_FILE = "first_visit.json"  # lengen.first_visit's numbers, when the run was saved with them
# Beside a run saved before its first-visit numbers: who is measuring them (token, pid, host). Gone once they are in.
PENDING_FILE = "first_visit.pending"
_RUN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
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


def check_run_id(run_id: object) -> str:
    """Return `run_id` if it is safe as a directory name, else raise `StoreError`.

    The pattern has no separators and must start with a letter or digit; with `..` excluded as
    well, an id can neither climb out of the runs directory nor collide with a `.tmp-*` directory.
    """
    if not is_run_id(run_id):
        raise StoreError(
            f"invalid run id {run_id!r}: use 1 to 128 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..'"
        )
    return run_id


def is_run_id(name: object) -> TypeGuard[str]:
    return isinstance(name, str) and _RUN_ID.fullmatch(name) is not None and ".." not in name


def write_run(directory: Path, run: Run, first_visit: dict[str, Any] | None = None,
              pending: dict[str, Any] | None = None) -> None:
    """Write `run`'s files into `directory` and flush them to disk, with its `first_visit` numbers when given,
    else with the `pending` mark (who measures them) when given."""
    weights_path = directory / WEIGHTS_FILE
    save_file(_unique_state(run.model), weights_path)
    fsync_file(weights_path)
    created = datetime.now(UTC).isoformat()
    metrics = {"format": FORMAT, "created": created, "weights_sha256": sha256(weights_path),
               **{name: getattr(run, name) for name in _RUN_FIELDS}, "device": run.training_device}
    if run.verdict is not None:
        metrics["verdict"] = run.verdict.to_dict()
    write_json(directory / CONFIG_FILE, run.config.to_dict())
    write_json(directory / METRICS_FILE, metrics)
    names = [WEIGHTS_FILE, CONFIG_FILE, METRICS_FILE]
    if first_visit is not None:
        write_json(directory / FIRST_VISIT_FILE, first_visit)
        names.append(FIRST_VISIT_FILE)
    elif pending is not None:
        write_json(directory / PENDING_FILE, pending)
        names.append(PENDING_FILE)
    # mkdtemp and safetensors create owner-only modes; a stored run (and a shipped preset) is for
    # every local user to read, e.g. the container's non-root user reading presets copied as root.
    for name in names:
        (directory / name).chmod(0o644)
    directory.chmod(0o755)
    fsync_dir(directory)


def read_record(directory: Path) -> tuple[RunSummary, dict[str, Any], str | None]:
    """The summary, the `Run` fields and the recorded sha256 of the weights (None for a run saved
    before it was recorded) of a stored run, checked; `StoreError` names the bad file."""
    config_path, metrics_path = directory / CONFIG_FILE, directory / METRICS_FILE
    try:
        config = RunConfig.from_stored(read_json(config_path))  # a setting added since: its legacy value
    except _DAMAGE as error:
        raise StoreError(f"invalid run config in {config_path}: {error}") from error
    if config.run_id() != directory.name:
        raise StoreError(f"{config_path} describes run {config.run_id()}, not {directory.name}")
    metrics = read_json(metrics_path)
    if not isinstance(metrics, dict) or metrics.get("format") != FORMAT:
        found = metrics.get("format") if isinstance(metrics, dict) else None
        raise StoreError(f"{metrics_path} has format {found!r}; this version reads format {FORMAT}")
    try:
        fields: dict[str, Any] = {
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


def scan(runs_dir: Path) -> tuple[list[RunSummary], dict[str, str]]:
    """The readable runs in `runs_dir`, newest first, and the damaged ones by id, each with a message naming
    the file at fault: one bad directory never hides the others."""
    summaries: list[RunSummary] = []
    corrupt: dict[str, str] = {}
    if not runs_dir.is_dir():
        return summaries, corrupt
    for directory in sorted(runs_dir.iterdir()):
        if not directory.is_dir() or not is_run_id(directory.name):
            continue  # temp directories and anything else not written by a store's save
        try:
            summary, _, _ = read_record(directory)
            check_weights(directory / WEIGHTS_FILE)
        except Exception as error:  # noqa: BLE001 — one bad folder must never hide the others
            if not directory.is_dir():
                continue  # deleted or evicted by another writer while it was read: gone, not damaged
            corrupt[directory.name] = (str(error) if isinstance(error, StoreError)
                                       else f"unreadable run {directory}: {error!r}")
        else:
            summaries.append(summary)
    summaries.sort(key=lambda summary: summary.created, reverse=True)  # stable: ties stay by id
    return summaries, corrupt


def load_weights(directory: Path, model: torch.nn.Module, digest: str | None) -> None:
    """Load the run's weights into `model` (built from its config), checked against the sha256 `digest`
    recorded when they were saved (None: a run saved before it was recorded)."""
    weights_path = directory / WEIGHTS_FILE
    if digest is not None and sha256(weights_path) != digest:
        raise StoreError(f"damaged weights file {weights_path}: its sha256 differs from the one recorded when it "
                         "was saved; delete the run and train it again")
    try:
        model.load_state_dict(_with_aliases(load_file(weights_path), model))
    except (OSError, RuntimeError, SafetensorError) as error:
        raise StoreError(f"damaged weights file {weights_path}: {error}") from error


def check_weights(path: Path) -> None:
    """Read only the header, which catches a missing, truncated or foreign file without the tensors."""
    try:
        with safe_open(path, framework="pt") as weights:
            weights.keys()
    except (OSError, SafetensorError) as error:
        raise StoreError(f"damaged weights file {path}: {error}") from error


def sha256(path: Path) -> str:
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


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # bad UTF-8, bad JSON, nesting past the parser's stack
        raise StoreError(f"unreadable {path}: {error}") from error


def write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=2)
        file.flush()
        os.fsync(file.fileno())


def fsync_file(path: Path) -> None:
    with open(path, "rb+") as file:
        os.fsync(file.fileno())


def fsync_dir(path: Path) -> None:
    """Persist directory entries (new files, a rename); POSIX only, Windows cannot open directories."""
    if os.name != "posix":
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

"""Several writers of one store: the lock they take turns under, temp directories and claims on work in
progress (a run's first-visit numbers being measured) that name their writer, and telling a dead writer's
leftovers from a live writer's work.

Writers may be processes on one machine or on several (app replicas sharing `LENGEN_HOME` on a shared
volume). Every rename into or out of the runs directory, and the quota's count and eviction, happen under
one exclusive `fcntl.flock` on `runs/.lock` (`lock`). A temp directory names its writer's host and
process, so a cleaner removes at once only what a dead process *of its own host* left (another host's
processes cannot be seen from here: theirs go by age, `clean_partial`). The volume must give `flock`
across its clients and an atomic `rename` within one directory (docs/scale.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

TEMP_PREFIX = ".tmp-"
LOCK_FILE = ".lock"  # in the runs directory: writers of the same store take turns to rename runs in and out


@contextlib.contextmanager
def lock(runs_dir: Path) -> Iterator[None]:
    """An exclusive lock on a store's runs directory (POSIX; elsewhere, none)."""
    if os.name != "posix":
        yield
        return
    import fcntl

    runs_dir.mkdir(parents=True, exist_ok=True)
    with open(runs_dir / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def host() -> str:
    """This machine (or container) as it names itself, in characters safe in a file name."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", os.uname().nodename)[:64] or "unknown"  # the host name, without a socket


def temp_prefix() -> str:
    """Temp directories carry their writer's process id and host, so a leftover of a killed writer on
    this host is known, and another host's writer (another replica) is never taken for a dead one."""
    return f"{TEMP_PREFIX}{os.getpid()}@{host()}@"


def temp_owner(name: str) -> int | None:
    """The process id of a temp directory's writer when it ran on this host, else None (another host's,
    or an older version's name without a host)."""
    match = re.fullmatch(re.escape(TEMP_PREFIX) + r"(\d{1,10})@([A-Za-z0-9._-]{1,64})@.*", name)
    return int(match.group(1)) if match and match.group(2) == host() else None


def alive(pid: int) -> bool:
    """Whether process `pid` of this host is running (one owned by someone else counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def claim(token: str) -> dict[str, object]:
    """A mark saying that this process (of this host) is doing the work named by `token`."""
    return {"token": token, "pid": os.getpid(), "host": host()}


def claim_alive(path: Path, give_up_seconds: float) -> bool:
    """Whether the writer of the `claim` stored at `path` may still be at work: its process when it is of this
    host, else (another host's processes cannot be seen from here) whether the mark is younger than
    `give_up_seconds`. False for a missing or unreadable mark."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        if owner.get("host") != host():
            return time.time() - path.stat().st_mtime < give_up_seconds
        return alive(int(owner["pid"]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return False


def clean_partial(runs_dir: Path, older_than_seconds: float) -> list[str]:
    """Remove leftover temp directories in `runs_dir`: those of a process of this host that is gone at once,
    others (another host's, or from an older version without a host) once older than `older_than_seconds`;
    returns their names."""
    if not runs_dir.is_dir():
        return []
    cutoff = time.time() - older_than_seconds
    removed = []
    for path in sorted(runs_dir.iterdir()):
        if not (path.name.startswith(TEMP_PREFIX) and path.is_dir()):
            continue
        owner = temp_owner(path.name)
        try:
            old = path.stat().st_mtime <= cutoff
        except FileNotFoundError:  # renamed into place or removed by its writer meanwhile
            continue
        if (owner is not None and not alive(owner)) or (owner is None and old):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


def remove(paths: list[Path]) -> None:
    """Remove directories renamed out of sight (after the lock is released)."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)

"""What the load tests share: the group their browsers run in, kept back so that the servers they load
are not starved by them (`BrowserGroup`), and a process's children and peak memory from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # the thread or process ended meanwhile
            pass
    return found


class BrowserGroup:
    """Where the load's browsers run. Niceness alone does not keep them back: chromium sets its own
    processes' priorities (-8 for the browser, 0 for pages, as root), and Linux's autogroup scheduler
    gives each session (chromium calls setsid) an equal share. So, where the cgroup v1 cpu controller
    is writable (root here), the Playwright driver goes into a cgroup of its own with the smallest
    CPU weight before it starts chromium, and everything chromium starts stays there: `kind` is
    "cgroup". Elsewhere `kind` is "nice" and the browsers compete with the server."""

    CGROUPS = Path("/sys/fs/cgroup/cpu")

    def __init__(self, shares: int = 2) -> None:
        """`shares`: the group's cpu.shares (a process of its own has 1024): 2 leaves the browsers only what
        nothing else on the machine wants; more lets them through on a machine busy with other work."""
        self.path, self.kind, self.shares = self.CGROUPS / f"lengen-load-{os.getpid()}", "nice", shares

    def enter_drivers(self) -> None:
        """Move this process's Playwright drivers into the group (call before launching chromium)."""
        drivers = [pid for pid in children(os.getpid()) if b"playwright" in self._cmdline(pid)]
        try:
            self.path.mkdir(exist_ok=True)
            (self.path / "cpu.shares").write_text(str(self.shares))
            for pid in drivers:
                (self.path / "cgroup.procs").write_text(str(pid))
            self.kind = "cgroup" if drivers else "nice"
        except OSError:
            self.kind = "nice"

    def close(self) -> None:
        if not self.path.exists():
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:
                (self.CGROUPS / "cgroup.procs").write_text(pid)
            except OSError:
                pass
        try:
            self.path.rmdir()
        except OSError:
            pass

    @staticmethod
    def _cmdline(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""

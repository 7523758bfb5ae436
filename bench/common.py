"""What every benchmark part shares: the machine, medians, peak memory, the issue's targets."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PEER_PYTHON = ROOT / "bench" / ".venv-peer" / "bin" / "python"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def peak_rss_bytes() -> int:
    """This process's peak resident memory (VmHWM), from /proc; 0 where there is no /proc."""
    return _proc_status_kib("VmHWM") * 1024


def rss_bytes() -> int:
    return _proc_status_kib("VmRSS") * 1024


def _proc_status_kib(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def machine() -> dict:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cuda": torch.cuda.is_available(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
    }


def versions() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "streamlit": _version("streamlit"),
            "playwright": _version("playwright")}


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10,
                             check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def python_env(threads: int) -> dict:
    """The environment for a child process: the repo importable, the same torch thread count."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


@dataclass(frozen=True)
class Target:
    """One target of issue 6: `value <op> bound`, in the figure's unit."""

    key: str
    text: str
    bound: float
    at_most: bool  # True: value ≤ bound is met; False: value ≥ bound is met

    def check(self, value: float | None) -> dict:
        if value is None:
            return {"target": self.text, "value": None, "status": "not measured"}
        met = value <= self.bound if self.at_most else value >= self.bound
        return {"target": self.text, "value": value, "status": "met" if met else "missed"}


TARGETS = {
    "training_speedup": Target("training_speedup", "lengen ≥ 2× the peer's steps/s", 2.0, at_most=False),
    "evaluation_speedup": Target("evaluation_speedup", "lengen ≥ 50× faster than the peer on 16…4096", 50.0,
                                 at_most=False),
    "evaluation_2^20_seconds": Target("evaluation_2^20_seconds", "2^20 × 256 in ≤ 2 s (issue 28)", 2.0, at_most=True),
    "evaluation_2^20_peak_gb": Target("evaluation_2^20_peak_gb", "2^20 peak memory ≤ 1 GB (issue 28)", 1.0,
                                      at_most=True),
    "prediction_seconds": Target("prediction_seconds", "prediction at 20 lengths ≤ 2 s", 2.0, at_most=True),
    "app_start_seconds": Target("app_start_seconds", "streamlit run → Start page drawn ≤ 8 s", 8.0, at_most=True),
    "app_preset_dilution_seconds": Target("app_preset_dilution_seconds", "preset → Dilution chart drawn ≤ 2 s", 2.0,
                                          at_most=True),
    "app_page_switch_seconds": Target("app_page_switch_seconds", "page switch with a run selected ≤ 1.5 s", 1.5,
                                      at_most=True),
    "app_first_live_update_seconds": Target("app_first_live_update_seconds",
                                            "Train → first live chart update ≤ 1 s", 1.0, at_most=True),
}

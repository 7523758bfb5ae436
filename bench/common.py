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
GB = 1e9


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
    """One target: `value <op> bound`. The value is lengen's figure itself, in `unit`, or, with `ratio`,
    lengen's over the peer's ("lengen/peer") or the peer's over lengen's ("peer/lengen": how many times
    faster)."""

    figure: str  # what is measured, in words
    text: str  # the target, in words
    bound: float
    at_most: bool  # True: value ≤ bound is met; False: value ≥ bound is met
    unit: str = "s"  # of the lengen and peer figures
    ratio: str = ""  # "", "lengen/peer" or "peer/lengen"
    issue: int = 28  # the issue that set it

    def check(self, lengen: float | None, peer: float | None = None, *, case: str = "",
              value: float | None = None, note: str = "") -> dict:
        """One row of the targets table. `value` overrides the checked value (an upper bound, say)."""
        if value is None:
            value = lengen if not self.ratio else self.ratio_of(lengen, peer)
        if value is None:
            status = "not measured"
        else:
            met = value <= self.bound if self.at_most else value >= self.bound
            status = "met" if met else "missed"
        return {"figure": self.figure + (f", {case}" if case else ""), "lengen": lengen, "peer": peer,
                "unit": self.unit, "value": value, "ratio": self.ratio, "target": self.text, "status": status,
                "note": note, "issue": self.issue}

    def ratio_of(self, lengen: float | None, peer: float | None) -> float | None:
        if not lengen or not peer:
            return None
        return lengen / peer if self.ratio == "lengen/peer" else peer / lengen


# Every target the benchmark checks, in one place: `bench.__main__` measures, `bench.report` prints them.
# Issue 28 ("Fast wherever a person waits") set the training, 2^20 and app bounds; issue 6 the others.
TARGETS = {
    "training_steps_per_second": Target("training steps/s", "≥ 5× the peer's", 5.0, at_most=False,
                                        unit="steps/s", ratio="lengen/peer"),
    "training_seconds_to_target": Target("training seconds to 99%", "≤ ½ the peer's", 0.5, at_most=True,
                                         ratio="lengen/peer"),
    "evaluation_speedup": Target("evaluation, 256 sequences at 16…4096, total", "≥ 50× faster than the peer",
                                 50.0, at_most=False, ratio="peer/lengen", issue=6),
    "core_2^20_seconds": Target("core `evaluate`, 2^20 × 256 (fresh process)", "≤ 2 s", 2.0, at_most=True),
    "core_2^20_peak_gb": Target("core `evaluate`, 2^20 × 256: peak memory of the process", "≤ 1 GB", 1.0,
                                at_most=True, unit="GB"),
    "command_2^20_seconds": Target("`python -m lengen evaluate RUN --lengths 1048576 --samples 256`, wall",
                                   "≤ 2 s", 2.0, at_most=True),
    "command_2^20_peak_gb": Target("that command: peak memory", "≤ 1 GB", 1.0, at_most=True, unit="GB"),
    "command_2^20_same": Target("that command: accuracy and target mass against the core's",
                                "the same (largest absolute difference ≤ 1e-6)", 1e-6, at_most=True, unit=""),
    "prediction_seconds": Target("prediction at 20 lengths up to 2^20", "≤ 2 s", 2.0, at_most=True, issue=6),
    "app_start_seconds": Target("app: `streamlit run` → Start page's first chart drawn", "≤ 5 s", 5.0,
                                at_most=True),
    "app_preset_dilution_seconds": Target("app: preset click → Dilution charts drawn", "≤ 1 s", 1.0, at_most=True),
    "app_page_switch_seconds": Target("app: page switch (or Theory tab) with a run selected, the slowest measured", "≤ 1 s", 1.0,
                                      at_most=True),
    "app_first_live_update_seconds": Target("app: Train click → first live chart update", "≤ 1 s", 1.0,
                                            at_most=True, issue=6),
}

"""Process-wide settings of the processes that serve the lab, and what this process may use.

The app's server, its training children and the command line call `limit_heap_growth()` (and
`deterministic_cublas()`) once at start. `usable_cpus()` is the number of CPUs this process may really run on: its affinity, capped
by a cgroup (container) CPU quota, which `os.cpu_count()` ignores. `device_setting()` is the
operator's device for the app's trainings and analyses (`$LENGEN_DEVICE`, auto by default: CUDA,
then MPS, then the CPU, as `lengen_core.training.resolve_device` picks), and `device_name()` the
words a page or the command line shows for a device (the GPU's own name on CUDA).

Why: glibc's malloc serves a block larger than its mmap threshold with a mapping of its own, given
back to the system on free, but after such a block is freed it raises the threshold to that block's
size (up to 32 MB). The attention of a long sequence is computed block by block, each block's
logits and weights about 16 MB; once the threshold has risen past them they come from the heap,
and the heap keeps what it is given. Measured on one forward pass of one 8,192-token sequence
through a 1-layer, 16-head, d_model 512 transformer: peak resident memory 4.6 GB with the moving
threshold, 0.5 GB with a fixed one of 1 MB. Fixing it also fixes the trim threshold (glibc then stops
moving both), at 128 KB unless set: blocks of 1 MB and more were then fresh mappings each, and the heap
was trimmed under the smaller ones, so the prediction's many blocks of a few MB were faulted in anew
every time (4.4 million page faults for the default run's prediction at 20 lengths to 2^20: 2.3–2.8 s,
against 1.3–1.6 s with glibc's moving thresholds). At 8 MB and 32 MB the attention's 16 MB blocks are
still mappings of their own, given back on free, and the prediction took 1.1–1.5 s; the forward-pass
evaluation of the largest transformer (2 layers, 16 heads, d_model 512, 8,192 tokens) grew the process
by 167 MB against 148 MB at 1 MB (measured 2026-12-04). `MALLOC_MMAP_THRESHOLD_=8388608` and
`MALLOC_TRIM_THRESHOLD_=33554432` in the environment do the same for a process started with them; the
Dockerfile sets both.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import os
import sys
from pathlib import Path
from typing import get_args

import lengen_core
from lengen_core.config import DeviceName

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
MMAP_THRESHOLD_BYTES = 8 << 20
TRIM_THRESHOLD_BYTES = 32 << 20


@functools.cache
def limit_heap_growth() -> bool:
    """Fix glibc's mmap threshold at 8 MB and its trim threshold at 32 MB (see the module docstring); False
    where there is no glibc. Once per process: later calls return the first answer."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False


def one_torch_thread() -> None:
    """The server's analyses on one torch thread (a session's script thread and every thread made later take
    it as their default). Measured (bench/rules_threads.py, bench/README.md): one inference rule's measurement
    on a fresh run took 0.81-0.84 s on one thread against 0.71 s on two on a quiet 2-core machine, but 3.7-4.8 s
    against 26-77 s with other work on the cores (OpenMP's two threads wait on each other), and 0.85-0.90 s
    against 2.0-2.1 s beside one busy process. A shared server is rarely quiet. Trainings set their own count
    in their processes (lengen.training_process, lengen.ray_pool)."""
    import torch  # here, not at the top: limit_heap_growth and the CPU count need no torch

    torch.set_num_threads(1)


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def env_whole_number(name: str, default: int, error: type[Exception] = ValueError, unit: str = "a whole number") -> int:
    """An operator's setting: the environment variable `name` as a whole number ≥ 1, `default` when
    unset; anything else raises `error` naming the variable and what is allowed."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isascii() or not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise error(f"{name}={text!r} is not allowed: give {unit} of at least 1")
    return int(text)


def cgroup_cpu_limit(v2: Path = CGROUP_CPU_MAX, v1_quota: Path = CGROUP_V1_QUOTA,
                     v1_period: Path = CGROUP_V1_PERIOD) -> float | None:
    """CPUs allowed by the cgroup's quota (e.g. `docker run --cpus 1.5`: 1.5), None when unlimited."""
    try:
        quota, period = v2.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota, period = int(v1_quota.read_text()), int(v1_period.read_text())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity (`taskset`), capped by the cgroup quota, at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        cpus = min(cpus, max(1, math.floor(limit)))
    return max(1, cpus)


DEVICE_ENV = "LENGEN_DEVICE"
CUBLAS_ENV, CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG", ":4096:8"


def deterministic_cublas() -> None:
    """Give cuBLAS the fixed workspace its deterministic mode needs (`CUBLAS_WORKSPACE_CONFIG`), unless
    the operator set one: torch's deterministic algorithms (every training step) then make a CUDA
    training the same bytes each time. Read when cuBLAS starts, so called at process start, before
    any CUDA work; the training processes a server starts inherit it. Nothing changes on a CPU."""
    os.environ.setdefault(CUBLAS_ENV, CUBLAS_WORKSPACE)


def device_setting(error: type[Exception] = ValueError) -> str:
    """The operator's device for the app (its trainings and its analyses): `$LENGEN_DEVICE`, one of
    auto, cpu, cuda or mps (any case), auto when unset; anything else raises `error` naming the
    variable. Resolved by `lengen_core.training.resolve_device`, which refuses a device this
    machine does not have."""
    text = os.environ.get(DEVICE_ENV, "").strip().lower()
    if not text:
        return "auto"
    allowed = get_args(DeviceName)
    if text not in allowed:
        raise error(f"{DEVICE_ENV}={text!r} is not allowed: give one of {', '.join(allowed)}")
    return text


def device_name(device: object) -> str:
    """A device in words: 'cpu', 'cuda (NVIDIA H200)' with the GPU's name, 'Apple silicon (MPS)'."""
    import torch  # here, not at the top: the server's first imports stay light

    device = torch.device(device)
    if device.type == "cuda":
        try:
            return f"{device} ({torch.cuda.get_device_name(device)})"
        except (RuntimeError, AssertionError, ValueError):  # no driver or no such GPU in this process
            return str(device)
    if device.type == "mps":
        return "Apple silicon (MPS)"
    return str(device)


def ray_modules() -> list[str]:
    """The two packages a Ray worker needs from this checkout (`runtime_env`'s py_modules): the application
    (this package) and the science it calls. The rest of the environment the workers have."""
    return [str(Path(__file__).resolve().parent), str(Path(lengen_core.__file__).resolve().parent)]

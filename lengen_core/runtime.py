"""Process-wide settings of the processes that serve the lab: the app's server, its training
children and the command line call `limit_heap_growth()` once at start.

Why: glibc's malloc serves a block larger than its mmap threshold with a mapping of its own, given
back to the system on free, but after such a block is freed it raises the threshold to that block's
size (up to 32 MB). The attention of a long sequence is computed block by block, each block's
logits and weights about 16 MB; once the threshold has risen past them they come from the heap,
and the heap keeps what it is given. Measured on one forward pass of one 8,192-token sequence
through a 1-layer, 16-head, d_model 512 transformer: peak resident memory 4.6 GB with the moving
threshold, 0.5 GB with a fixed one of 1 MB (`MALLOC_MMAP_THRESHOLD_=1048576` in the environment
does the same for a process started with it; the Dockerfile sets it as well).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 20


@functools.cache
def limit_heap_growth() -> bool:
    """Fix glibc's mmap threshold at 1 MB (see the module docstring); False where there is no glibc.
    Once per process: later calls return the first answer."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False

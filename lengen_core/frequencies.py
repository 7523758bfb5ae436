"""RoPE's frequencies and the carrier margin they leave: pure arithmetic, read by the config's check
of a constructed head (lengen_core.config), the rotary encoding (lengen_core.models.encodings) and
the constructed head itself (lengen_core.models.construct). It imports nothing of lengen_core, so
each of them imports it at the top.

torch is imported on use, not at the top: lengen_core.config reads this module and stays free of
torch, so the server's first imports (serve.py, lengen.runtime) stay light.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

MIN_GAP = 0.1  # the least carrier margin a constructed head accepts: A ≤ ln(2^17)/0.1 ≈ 118, logits inside float32
GAP_CHUNK = 4_096  # offsets per chunk of the margin search: (chunk, m) float64


def rope_frequencies(d_head: int, base: float) -> torch.Tensor:
    """ω_j = base^(-2j/D) for j < D/2, float64."""
    import torch  # on use: see the module docstring

    return base ** (-torch.arange(0, d_head // 2, dtype=torch.float64) * 2.0 / d_head)


@functools.lru_cache(maxsize=256)
def carrier_gap(pairs: int, base: float, max_positions: int) -> float:
    """g = m − max c(δ) over 1 ≤ δ ≤ max_positions − 1, c(δ) = Σ_j cos(ω_j δ) over the m = `pairs`
    frequencies of a head of width 2m (c is even, so this covers negative δ too)."""
    import torch  # on use: see the module docstring

    omega = rope_frequencies(2 * pairs, base)
    best = -math.inf
    for start in range(1, max_positions, GAP_CHUNK):
        delta = torch.arange(start, min(start + GAP_CHUNK, max_positions), dtype=torch.float64)
        best = max(best, float(torch.cos(delta[:, None] * omega[None]).sum(dim=1).max()))  # (chunk, m) → scalar
    return pairs - best if best > -math.inf else float(pairs)

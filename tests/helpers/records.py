"""Comparing two numbers records (dataclasses) as the first-visit tests compare them."""

from __future__ import annotations

import dataclasses
import math


def same(a: object, b: object) -> bool:
    """Two numbers records equal field by field (floats to a relative 1e-9, NaN to NaN), wall times aside."""
    left, right = dataclasses.asdict(a), dataclasses.asdict(b)
    left.pop("seconds", None), right.pop("seconds", None)
    for key, x in left.items():
        y = right[key]
        if isinstance(x, float) and isinstance(y, float):
            if not (math.isnan(x) and math.isnan(y)) and not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif x != y:
            return False
    return True

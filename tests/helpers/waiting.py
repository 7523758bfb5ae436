"""Waiting for a condition in tests: polled, with a deadline that fails the test, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 60.0, poll: float = 0.02) -> T:
    """Call `condition` every `poll` seconds until it returns something true, and return that; the test
    fails with "timed out" after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(poll)
    return value

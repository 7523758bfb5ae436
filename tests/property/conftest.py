"""Shared setup of the property tests: one torch thread, and token pairs that differ only after t."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def single_cpu_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a second thread only slows things down under load
    yield
    torch.set_num_threads(previous)

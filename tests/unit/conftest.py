"""Shared unit-test setup: trained default runs, each trained once per session."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Run, train


@pytest.fixture(scope="session")
def trained() -> Callable[..., Run]:
    """`trained(encoding=..., attention=...)`: the default config with those changes, trained on the CPU once."""
    runs: dict[tuple, Run] = {}

    def get(**changes) -> Run:
        key = tuple(sorted(changes.items()))
        if key not in runs:
            runs[key] = train(with_changes(RunConfig(), **changes), "cpu")
        return runs[key]

    return get


@pytest.fixture(scope="session")
def rope(trained) -> Run:
    """The default config (RoPE, softmax), trained once."""
    return trained()


@pytest.fixture(scope="session")
def learned(trained) -> Run:
    return trained(encoding="learned")


@pytest.fixture(scope="session")
def rope_linear(trained) -> Run:
    return trained(attention="linear")

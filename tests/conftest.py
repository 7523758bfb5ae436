"""Shared test setup: hypothesis profiles, no test writes to the real run store, and GPU tests skip
cleanly without one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from lengen.runtime import limit_heap_growth

# Hypothesis profiles, chosen by HYPOTHESIS_PROFILE (default `ci`; `thorough` on demand). `ci` is
# Hypothesis's own CI profile (derandomized, so a run is reproducible; no deadline, which a loaded
# 2-core runner trips; no example database; a reproduction blob on failure) with 100 examples, which
# keeps the fast tier within minutes (300 cost the property tests three times as long; being
# derandomized, the same 100 run every time). `thorough` explores afresh on every run, keeps failing
# examples in the database and runs 20 times as many: for changes to the encodings, the evaluation
# or the config validation (`HYPOTHESIS_PROFILE=thorough bash scripts/test.sh tests/property`). Tests whose every example runs a model take a fixed share
# of either (tests/helpers/example_counts.py). Loaded here, before any test module is imported,
# so every `@settings` in a test inherits the profile.
settings.register_profile("ci", settings.get_profile("ci"), max_examples=100)
settings.register_profile("thorough", settings.get_profile("default"), max_examples=2_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
limit_heap_growth()  # as the app, its training children and the command line do (lengen.runtime)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# The many throwaway trainings of the suite are saved without their first-visit numbers (about 45 s of
# two cores for a default run: lengen.first_visit); the tests of those numbers turn it on.
os.environ.setdefault("LENGEN_MEASURE_ON_SAVE", "0")  # deterministic CUDA matmuls in the gpu tests, as the app sets


@pytest.fixture(scope="session", autouse=True)
def single_cpu_thread() -> Iterator[None]:
    """One torch thread in every test process. The models are tiny: a second intra-op thread only adds
    synchronisation, and when another process shares the CPU (the other xdist worker, a server, a
    training child) a parallel region waits for its descheduled thread, which slowed a training step
    from milliseconds to a tenth of a second and the AppTest pages' analyses tenfold. The cores are
    used by the xdist workers instead (scripts/test.sh). Servers and other subprocesses choose their own."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session", autouse=True)
def lengen_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point `LENGEN_HOME` at a temp directory for the session.

    Set in `os.environ` itself (not monkeypatch, which is function-scoped) so that servers and
    subprocesses started by app and e2e tests inherit it too; the caller's value is restored.
    """
    home = tmp_path_factory.mktemp("lengen-home")
    previous = os.environ.get("LENGEN_HOME")
    os.environ["LENGEN_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("LENGEN_HOME", None)
    else:
        os.environ["LENGEN_HOME"] = previous


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu`-marked tests when CUDA is unavailable, rather than letting them fail."""
    gpu_tests = [item for item in items if "gpu" in item.keywords]
    if not gpu_tests:
        return
    import torch  # only when needed: collecting a CPU-only subset should stay fast

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is false)")
    for item in gpu_tests:
        item.add_marker(skip)

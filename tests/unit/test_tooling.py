"""The linter and the type checker, as every Python developer runs them, in the fast tier (issue 41).

`ruff check .` lints the whole tree and `mypy` (no arguments) checks the files pyproject.toml lists, the typed
API first, each with the settings in pyproject.toml. A failure shows their own report, to be fixed in the code
(or, for a rule that does not fit, in pyproject.toml with the reason). Both are pinned in requirements-dev.txt;
the tests skip, saying so, where they are not installed. The format check (`ruff format --check .`) joins them
once the tree has been formatted.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.helpers.imports import ROOT

SETTINGS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is a development requirement (requirements-dev.txt)")
    result = _run("ruff", "check", ".", "--output-format", "concise")
    assert result.returncode == 0, f"ruff check . (settings: pyproject.toml):\n{result.stdout}{result.stderr}"


def test_mypy_finds_nothing():
    pytest.importorskip("mypy", reason="mypy is a development requirement (requirements-dev.txt)")
    result = _run("mypy")
    assert result.returncode == 0, f"mypy over {SETTINGS['tool']['mypy']['files']}:\n{result.stdout}{result.stderr}"


def test_the_settings_are_the_ones_the_tree_is_written_to():
    ruff = SETTINGS["tool"]["ruff"]
    assert ruff["line-length"] == 120 and ruff["format"]["quote-style"] == "double"
    assert {"F", "E9"} <= set(ruff["lint"]["select"])
    assert any(path.startswith("lengen/api") for path in SETTINGS["tool"]["mypy"]["files"])  # the typed API
    assert not (ROOT / "ruff.toml").exists()  # one place for the settings: ruff would read ruff.toml first

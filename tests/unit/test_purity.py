"""lengen_core and the application package lengen above it stay pure libraries: no printing, no network (the
README's layout), in every module of every subpackage, and importing them all leaves streamlit out. Which
layer may import which (the science never the application, neither of them streamlit) is read from the
source by tests/unit/test_tree_layers.py."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import lengen
import lengen_core
from tests.helpers.imports import imported_names

PACKAGE_DIR = Path(lengen_core.__file__).parent
APP_DIR = Path(lengen.__file__).parent
ROOT = PACKAGE_DIR.parent
SCIENCE = sorted(PACKAGE_DIR.rglob("*.py"))  # every subpackage too
SOURCES = sorted([*SCIENCE, *APP_DIR.rglob("*.py")])
# Every importable submodule, whoever adds it, in every subpackage; `__main__` runs the CLI when imported.
SUBMODULES = sorted(
    info.name for directory, prefix in ((PACKAGE_DIR, "lengen_core."), (APP_DIR, "lengen."))
    for info in pkgutil.walk_packages([str(directory)], prefix=prefix) if not info.name.endswith("__main__")
)
NETWORK_MODULES = {"requests", "urllib", "urllib3", "socket", "http", "httpx", "aiohttp"}


def test_the_package_has_its_core_modules():
    for name in (
        "config",
        "frequencies",
        "models.encodings",
        "models.attention",
        "models.head",
        "models.initial",
        "tasks",
        "training",
        "analysis.evaluate",
        "analysis.carrier",
        "analysis.dilution",
    ):
        assert f"lengen_core.{name}" in SUBMODULES
    for name in ("store", "cli", "jobs", "budget"):
        assert f"lengen.{name}" in SUBMODULES


def test_importing_the_core_leaves_streamlit_out():
    script = (
        "import importlib, sys\n"
        f"for name in {['lengen_core', 'lengen', *SUBMODULES]!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120, cwd=PACKAGE_DIR.parent
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # importing prints nothing either


def test_the_application_is_a_package_of_its_own():
    assert {p.stem for p in APP_DIR.glob("*.py")} >= {"store", "jobs", "training_process", "share", "cli", "budget",
                                                      "runtime"}
    assert not {p.stem for p in SCIENCE} & {"store", "jobs", "training_process", "share", "cli", "budget"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_prints(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]
    assert not calls, f"{path.name} calls print() at line(s) {calls}"
    assert "print(" not in _code_without_strings(tree)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_touches_the_network(path):
    top_level = {name.split(".")[0] for name in imported_names(path)}
    assert not top_level & NETWORK_MODULES, f"{path.name} imports {sorted(top_level & NETWORK_MODULES)}"


def _code_without_strings(tree: ast.AST) -> str:
    """The source with string constants (docstrings, messages) removed, so prose may say 'print('."""
    stripped = ast.parse(ast.unparse(tree))
    for node in ast.walk(stripped):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.unparse(stripped)

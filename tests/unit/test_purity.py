"""lengen_core stays a pure library: no streamlit, no printing, no network (STYLE.md)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import lengen_core

PACKAGE_DIR = Path(lengen_core.__file__).parent
SOURCES = sorted(PACKAGE_DIR.glob("*.py"))
# Every importable submodule, whoever adds it (cli included); `__main__` runs the CLI when imported.
SUBMODULES = sorted(
    f"lengen_core.{info.name}" for info in pkgutil.iter_modules([str(PACKAGE_DIR)]) if info.name != "__main__"
)
NETWORK_MODULES = {"requests", "urllib", "urllib3", "socket", "http", "httpx", "aiohttp"}


def test_the_package_has_its_core_modules():
    for name in (
        "config",
        "encodings",
        "attention",
        "model",
        "tasks",
        "training",
        "evaluate",
        "carrier",
        "dilution",
        "store",
    ):
        assert f"lengen_core.{name}" in SUBMODULES


def test_importing_the_core_leaves_streamlit_out():
    script = (
        "import importlib, sys\n"
        f"for name in {['lengen_core', *SUBMODULES]!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120, cwd=PACKAGE_DIR.parent
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # importing prints nothing either


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.name)
def test_no_module_prints(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]
    assert not calls, f"{path.name} calls print() at line(s) {calls}"
    assert "print(" not in _code_without_strings(tree)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.name)
def test_no_module_touches_the_network(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
    top_level = {name.split(".")[0] for name in imported}
    assert not top_level & NETWORK_MODULES, f"{path.name} imports {sorted(top_level & NETWORK_MODULES)}"
    assert "streamlit" not in top_level


def _code_without_strings(tree: ast.AST) -> str:
    """The source with string constants (docstrings, messages) removed, so prose may say 'print('."""
    stripped = ast.parse(ast.unparse(tree))
    for node in ast.walk(stripped):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.unparse(stripped)

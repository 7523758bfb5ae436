"""lengen_core and the application package lengen above it stay pure libraries: no streamlit, no printing,
no network (the README's layout), in every module of every subpackage; and the science (lengen_core)
never imports the application (lengen: store, jobs, training processes, budgets, links, the CLI)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import lengen
import lengen_core

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


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved against lengen_core."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = "lengen_core" + (f".{base}" if base else "")
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


@pytest.mark.parametrize("path", SCIENCE, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_science_never_imports_the_application(path):
    serving = sorted(name for name in _imports(path) if name == "lengen" or name.startswith("lengen."))
    assert not serving, f"{path.name} imports {serving}"


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

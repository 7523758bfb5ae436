"""lengen_core's modules, and the application package lengen above them, form layers without a cycle
(issues 25, 41), read from the source with `ast`:

    config, frequencies,         the base: settings, pure arithmetic and the accuracy bar
      thresholds
    tasks, models/, claims       the data, the models, what each encoding and attention is expected to show
    analysis/                    what a trained model shows; reads models, never trains
    training, optimisation,      trainings
      transfer (the trainer knows nothing of its observers: it is given a probe)
    measure                      the one measurement of a run (evaluate → predict → fit → horizon)
    lengen (its own package)     the application: store, jobs, budgets, links, sweeps, the CLI

Every import counts, at the top, under TYPE_CHECKING or inside a function: the graph of their modules
is acyclic, and no module imports another of them inside a function (the way a cycle gets hidden). Lazily importing a third-party module (torch, ray, pandas) is not a lengen_core import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lengen
import lengen_core

PACKAGE_DIR = Path(lengen_core.__file__).parent
APP_DIR = Path(lengen.__file__).parent
ROOT = PACKAGE_DIR.parent
SOURCES = sorted([*PACKAGE_DIR.rglob("*.py"), *APP_DIR.rglob("*.py")])


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in SOURCES}


def _package(name: str) -> str:
    """The package `name` is in (itself, for a package's __init__)."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> set[str]:
    """The lengen_core modules an import statement loads (a package's __init__ for `import package`)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
        return {name for name in names if name in MODULES}
    base = node.module or ""
    if node.level:
        package = _package(importer).split(".")
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    found = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES}
    if len(found) < len(node.names) and base in MODULES:
        found.add(base)  # names defined in the module (or package) itself
    return found


def _imports(path: Path) -> tuple[set[str], list[tuple[int, str]]]:
    """(every lengen_core module `path` imports, [(line, module) of those imported inside a function])."""
    importer = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    every: set[str] = set()
    inside: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                targets = _targets(child, importer)
                every.update(targets)
                inside.extend((child.lineno, target) for target in sorted(targets) if in_function)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    every.discard(importer)
    return every, inside


GRAPH = {name: _imports(path)[0] for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that ends where it starts, or None."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (found := walk(target)):
                return found
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := walk(start)):
            return found
    return None


def test_the_graph_reads_the_imports_it_should():
    assert "lengen_core.models.initial" in GRAPH["lengen_core.training"]
    assert "lengen.budget" in GRAPH["lengen.sweep"]  # `from lengen import budget`
    assert "lengen_core.frequencies" in GRAPH["lengen_core.config"]
    assert "lengen_core.measure" in GRAPH["lengen.sweep"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_lengen_core_has_no_import_cycle():
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_lengen_core_module_is_imported_inside_a_function(path):
    inside = _imports(path)[1]
    assert not inside, f"{module_name(path)} imports inside a function: " + ", ".join(
        f"{module} (line {line})" for line, module in inside)


def _layer(name: str) -> str:
    if name == "lengen" or name.startswith("lengen."):
        return "app"
    for layer in ("models", "analysis"):
        if name == f"lengen_core.{layer}" or name.startswith(f"lengen_core.{layer}."):
            return layer
    return name.removeprefix("lengen_core.")


# What each layer may not import (besides the cycles the graph already forbids).
FORBIDDEN = {
    "config": {"transfer", "measure", "models", "analysis", "app", "training", "optimisation", "tasks"},
    "frequencies": {"transfer", "measure", "config", "models", "analysis", "app", "training", "optimisation", "tasks"},
    "thresholds": {"transfer", "measure", "config", "models", "analysis", "app", "training", "optimisation", "tasks"},
    "tasks": {"transfer", "measure", "models", "analysis", "app", "training", "optimisation"},
    "models": {"transfer", "measure", "analysis", "app", "training", "optimisation", "claims"},
    "claims": {"transfer", "measure", "analysis", "app", "training", "optimisation"},
    "analysis": {"transfer", "measure", "app", "training", "optimisation"},
    "training": {"transfer", "measure", "app", "optimisation"},
    "optimisation": {"measure", "app"},
    "transfer": {"measure", "app", "optimisation"},
    "measure": {"app", "optimisation"},
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_layer_imports_only_those_below_it(name):
    forbidden = FORBIDDEN.get(_layer(name), set())
    wrong = sorted(target for target in GRAPH[name] if _layer(target) in forbidden)
    assert not wrong, f"{name} ({_layer(name)}) imports {wrong}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_nothing_in_lengen_core_imports_the_app(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        above = {"ui", "pages", "app", "serve", "streamlit"} | ({"lengen"} if PACKAGE_DIR in path.parents else set())
        wrong = [n for n in names if n.split(".")[0] in above]
        assert not wrong, f"{path.name} imports {wrong} (line {node.lineno})"

"""The project's import graph, read from the source with `ast` (nothing is imported): the layer tests'
one reader (tests/unit/test_layers.py inside the packages, tests/unit/test_tree_layers.py over the tree).

Every import counts, at the top, under TYPE_CHECKING or inside a function. An edge goes from a module to
each module of the same `Modules` that one of its import statements loads; third-party modules are not
in the graph (`imported_names` lists them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def module_name(path: Path) -> str:
    """`ui/theory/charts.py` → `ui.theory.charts`, `ui/__init__.py` → `ui`, `app.py` → `app`."""
    parts = path.resolve().relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(*roots: str) -> list[Path]:
    """Every .py file under each root (a folder or a file, relative to the repository root), sorted."""
    found: list[Path] = []
    for root in roots:
        path = ROOT / root
        found.extend([path] if path.is_file() else path.rglob("*.py"))
    return sorted(found)


@dataclass(frozen=True)
class Import:
    """One import statement's edge: `importer` loads `target` (a module of the graph) at `line`."""

    importer: str
    target: str
    line: int
    in_function: bool


class Modules:
    """The modules of some source files, by dotted name, and the imports among them."""

    def __init__(self, paths: Iterable[Path]):
        self.paths = {module_name(path): path for path in paths}

    def __contains__(self, name: str) -> bool:
        return name in self.paths

    def package(self, name: str) -> str:
        """The package `name` is in (itself, for a package's __init__)."""
        return name if self.paths[name].name == "__init__.py" else name.rpartition(".")[0]

    def targets(self, node: ast.Import | ast.ImportFrom, importer: str) -> set[str]:
        """The modules of the graph an import statement loads (a package's __init__ for `import package`)."""
        if isinstance(node, ast.Import):
            return {alias.name for alias in node.names if alias.name in self}
        base = node.module or ""
        if node.level:
            package = self.package(importer).split(".")
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        found = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in self}
        if len(found) < len(node.names) and base in self:
            found.add(base)  # names defined in the module (or package) itself
        return found

    def imports(self, name: str) -> list[Import]:
        """Every edge out of module `name`, in the order of the source (a module importing itself is left out)."""
        tree = ast.parse(self.paths[name].read_text(encoding="utf-8"))
        edges: list[Import] = []

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    edges.extend(Import(name, target, child.lineno, in_function)
                                 for target in sorted(self.targets(child, name)) if target != name)
                visit(child, in_function or isinstance(child, FUNCTION_NODES))

        visit(tree, False)
        return edges

    def graph(self) -> dict[str, set[str]]:
        """Module → the modules it imports."""
        return {name: {edge.target for edge in self.imports(name)} for name in sorted(self.paths)}


def imported_names(path: Path) -> set[str]:
    """Every absolute module name `path` imports, third-party ones included (`from a.b import c` gives `a.b`).
    Relative imports are left out: they stay inside their own package."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
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

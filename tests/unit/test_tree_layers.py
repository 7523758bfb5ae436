"""The whole tree in layers (issue 41), read from the source with `ast` (tests/helpers/imports.py):

    app.py, serve.py   the router and the server
    pages/             one thin file per page; no page imports another
    ui/                the helpers the pages share, in folders by idea
    lengen/            the application: store, jobs, budgets, links, sweeps, presets, the CLI
    lengen_core/       the science: models → analysis → trainings → measure (tests/unit/test_layers.py)

A module imports only layers below its own. Streamlit belongs to ui/ and above. There is no import cycle in
the tree, and none among ui/'s folders either: each folder of ui/ and each module at its top is one node, so
`ui/theory/` ↔ `ui/analyses.py` is a loop even when no two modules import each other.

Above the application (ui/, pages/, app.py, serve.py) the science is reached through lengen, never directly:
only lengen_core.config, thresholds and claims may be imported there, as they are data (settings, the
accuracy bar, what each encoding is expected to show), not science. Every other module of lengen_core
(analysis, models, training, measure, optimisation, transfer, tasks, frequencies) is science.

The tools read the tree and the tree never reads them: scripts/ and bench/ import each name from the module
that defines it (never through another module's re-export), and scripts/ builds what the application ships
from the application's definitions, not from ui/ or pages/.

Three lists below are the remaining work of issue 41. Each is a ratchet: a module (or folder edge) not on its
list fails the test, and so does one on the list that no longer needs to be there, so the lists only shrink.
"""

from __future__ import annotations

import ast
import itertools

import pytest

from tests.helpers.imports import ROOT, Modules, cycle, imported_names, module_name, sources

LAYERS = ("science", "application", "ui", "pages", "top")  # low to high
TOP_LEVEL = {"lengen_core": "science", "lengen": "application", "ui": "ui", "pages": "pages", "app": "top",
             "serve": "top"}
TOOLS = {"scripts", "bench", "studies", "tests"}  # read the tree; the tree never reads them
STREAMLIT_FROM = "ui"  # the lowest layer that may import streamlit
VALUE_MODULES = {"lengen_core.config", "lengen_core.thresholds", "lengen_core.claims"}  # data, not science

SOURCES = sources("app.py", "serve.py", "pages", "ui", "lengen", "lengen_core")
MODULES = Modules(SOURCES)
GRAPH = MODULES.graph()
TOOL_MODULES = Modules([*SOURCES, *sources("scripts", "bench", "studies")])  # the tree and the tools beside it

# Modules above the application (all in ui/ today) that still import the science directly, not through lengen:
# the remaining work of issue 41 (lengen.api is the typed way through). Remove a module once it no longer does;
# add none.
SCIENCE_DIRECT = {
    "ui.analyses", "ui.captions.absolute", "ui.captions.accuracy", "ui.captions.attention", "ui.captions.common",
    "ui.captions.mechanism", "ui.captions.prediction", "ui.captions.readouts", "ui.captions.regime",
    "ui.charts.common", "ui.charts.compare", "ui.charts.transformer", "ui.compare_view", "ui.delays",
    "ui.lessons.files", "ui.reach", "ui.rules.captions", "ui.rules.maps", "ui.rules.runs",
    "ui.rules.select", "ui.rules.shipped", "ui.rules.view", "ui.runs", "ui.sweep_panels",
    "ui.theory.gradient_charts", "ui.theory.gradients", "ui.training.ending",
    "ui.training.frames", "ui.training.pool", "ui.transformer.absolute", "ui.views.attention",
    "ui.views.carrier", "ui.views.delays", "ui.views.dilution", "ui.views.preamble", "ui.views.transformer",
    "ui.widgets",
}

# Folder edges of ui/ that close a loop, each with the import that makes it: the remaining work of issue 41.
# Without them the folders form no loop; remove an edge once its import is gone.
FOLDER_LOOPS = {
    ("ui.captions", "ui.widgets"): "ui/captions/show.py draws through ui.widgets; the captions' builders are plain"
                                   " data in, a sentence out",
    ("ui.charts", "ui.analyses"): "ui/charts/compare.py types its input as ui.analyses.Comparison, a data type"
                                  " the charts should find below them",
    ("ui.rules", "ui.lessons"): "ui/rules/shipped.py reads the lessons' files (ui.lessons.files, inside a"
                                " function) while the lessons draw the rules' view",
}

# What scripts/ still reads from ui/ or pages/: definitions of what the presets ship, which belong to the
# application beside lengen.presets, lengen.shipped_rules and lengen.shipped_absolute. The remaining work of
# issue 41; remove a module once scripts/ reads it no more.
SCRIPTS_READ_UI = {"ui.rules.shipped", "ui.sweep_panels", "ui.transformer.absolute"}


def layer(name: str) -> str:
    return TOP_LEVEL[name.split(".")[0]]


def folder(name: str) -> str:
    """The node of ui/'s folder graph that module `name` is in: `ui.theory.charts` → `ui.theory`."""
    return ".".join(name.split(".")[:2])


def folder_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        if layer(name) == "ui":
            graph.setdefault(folder(name), set()).update(
                folder(target) for target in targets if layer(target) == "ui" and folder(target) != folder(name))
    return graph


def _ids(path):
    return str(path.relative_to(ROOT))


def test_the_graph_reads_the_imports_it_should():
    assert "ui.charts.common" in GRAPH["ui.theory.charts"]
    assert "lengen.share" in GRAPH["ui.theory.sections"]
    assert "ui.theory.gradient_charts" in GRAPH["ui.theory.gradients"]  # `from ui.theory import gradient_charts`
    assert "ui.training.pool" in GRAPH["app"]  # `import ui.training.pool`
    assert layer("app") == "top" and layer("ui.theory.charts") == "ui" and layer("lengen_core.models.head") == "science"
    assert folder("ui.theory.charts") == "ui.theory" and folder("ui.analyses") == "ui.analyses"


def test_every_python_file_of_the_tree_is_in_a_layer_or_a_tool():
    folders = [path for path in ROOT.iterdir() if path.is_dir() and not path.name.startswith(".")]
    files = [*ROOT.glob("*.py"), *(path for folder in folders for path in folder.rglob("*.py"))]
    stray = sorted(str(path.relative_to(ROOT)) for path in files
                   if module_name(path).split(".")[0] not in {*TOP_LEVEL, *TOOLS})
    assert not stray, f"in no layer: {stray} (a layer's folder, or a tool's: {sorted(TOOLS)})"


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_no_module_imports_a_layer_above_its_own(name):
    rank = LAYERS.index(layer(name))
    upward = sorted(target for target in GRAPH[name] if LAYERS.index(layer(target)) > rank)
    assert not upward, f"{name} ({layer(name)}) imports a layer above it: {upward}"
    if layer(name) == "pages":
        pages = sorted(target for target in GRAPH[name] if layer(target) == "pages")
        assert not pages, f"{name} imports another page: {pages}"


@pytest.mark.parametrize("path", SOURCES, ids=_ids)
def test_streamlit_and_the_tools_stay_above_and_outside(path):
    names = imported_names(path)
    tops = {name.split(".")[0] for name in names}
    if LAYERS.index(layer(module_name(path))) < LAYERS.index(STREAMLIT_FROM):
        assert "streamlit" not in tops, f"{module_name(path)} ({layer(module_name(path))}) imports streamlit"
    assert not tops & TOOLS, f"{module_name(path)} imports a tool: {sorted(tops & TOOLS)}"


def test_the_tree_has_no_import_cycle():
    found = cycle(GRAPH)
    assert found is None, "import cycle: " + " → ".join(found)


def test_ui_folders_form_no_loop_beyond_the_listed_edges():
    graph = folder_graph()
    edges = {(source, target) for source, targets in graph.items() for target in targets}
    gone = sorted(edge for edge in FOLDER_LOOPS if edge not in edges)
    assert not gone, f"these folder edges are gone: take them off FOLDER_LOOPS: {gone}"
    without = {source: targets - {t for s, t in FOLDER_LOOPS if s == source} for source, targets in graph.items()}
    found = cycle(without)
    assert found is None, "a loop among ui/'s folders: " + " → ".join(found) + _witnesses(found)
    reachable = {node: _reach(graph, node) for node in graph}
    not_loops = sorted((source, target) for source, target in FOLDER_LOOPS if source not in reachable[target])
    assert not not_loops, f"these edges close no loop any more: take them off FOLDER_LOOPS: {not_loops}"


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _witnesses(loop: list[str]) -> str:
    """The module imports behind each folder edge of a loop."""
    lines = []
    for source, target in itertools.pairwise(loop):
        lines += [f"\n  {name} imports {t}" for name in sorted(GRAPH) for t in sorted(GRAPH[name])
                  if layer(name) == "ui" == layer(t) and folder(name) == source and folder(t) == target]
    return "".join(lines)


def _science_imports(name: str) -> list[str]:
    return [f"{edge.target} (line {edge.line})" for edge in MODULES.imports(name)
            if layer(edge.target) == "science" and edge.target not in VALUE_MODULES]


def test_above_the_application_the_science_is_reached_through_lengen():
    above = [name for name in GRAPH if LAYERS.index(layer(name)) > LAYERS.index("application")]
    direct = {name: found for name in above if (found := _science_imports(name))}
    new = {name: found for name, found in direct.items() if name not in SCIENCE_DIRECT}
    assert not new, ("these modules import the science directly; reach it through lengen (lengen.api), or "
                     f"import only {sorted(VALUE_MODULES)}: {new}")
    done = sorted(SCIENCE_DIRECT - set(direct))
    assert not done, f"these modules no longer import the science directly: take them off SCIENCE_DIRECT: {done}"


def _defined(name: str) -> set[str]:
    """The names module `name` binds itself at its top (def, class, assignment), not by importing them."""
    bound: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(child.name)  # its body binds names of its own
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                bound.add(child.id)
            else:
                visit(child)  # if, try, for, with and the targets of assignments

    visit(ast.parse(TOOL_MODULES.paths[name].read_text(encoding="utf-8")))
    return bound


TOOL_SOURCES = sources("scripts", "bench")


@pytest.mark.parametrize("path", TOOL_SOURCES, ids=_ids)
def test_the_tools_read_each_name_from_the_module_that_defines_it(path):
    wrong = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in TOOL_MODULES and not node.level:
            defined = _defined(node.module)
            wrong += [f"{alias.name} from {node.module} (line {node.lineno})" for alias in node.names
                      if f"{node.module}.{alias.name}" not in TOOL_MODULES and alias.name not in defined]
    assert not wrong, f"{module_name(path)} reads a re-export; import from the defining module: {wrong}"


def test_scripts_read_the_application_not_the_ui():
    read = {edge.target for name in TOOL_MODULES.paths if name.startswith("scripts.")
            for edge in TOOL_MODULES.imports(name) if edge.target.split(".")[0] in {"ui", "pages"}}
    new = sorted(read - SCRIPTS_READ_UI)
    assert not new, f"scripts/ reads {new}: what the application ships is defined in lengen"
    done = sorted(SCRIPTS_READ_UI - read)
    assert not done, f"scripts/ no longer reads these: take them off SCRIPTS_READ_UI: {done}"

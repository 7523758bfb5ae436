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
is acyclic, and no module imports another of them inside a function (the way a cycle gets hidden). Lazily
importing a third-party module (torch, ray, pandas) is not a lengen_core import. The layers above the
application (ui/, pages/, app.py, serve.py) are tests/unit/test_tree_layers.py's; the reader is
tests/helpers/imports.py.
"""

from __future__ import annotations

import pytest

from tests.helpers.imports import ROOT, Modules, cycle, module_name, sources

SOURCES = sources("lengen_core", "lengen")
MODULES = Modules(SOURCES)
GRAPH = MODULES.graph()


def test_the_graph_reads_the_imports_it_should():
    assert "lengen_core.models.initial" in GRAPH["lengen_core.training"]
    assert "lengen.budget" in GRAPH["lengen.sweep"]  # `from lengen import budget`
    assert "lengen_core.frequencies" in GRAPH["lengen_core.config"]
    assert "lengen_core.measure" in GRAPH["lengen.sweep"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_lengen_core_has_no_import_cycle():
    found = cycle(GRAPH)
    assert found is None, "import cycle: " + " → ".join(found)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_lengen_core_module_is_imported_inside_a_function(path):
    inside = [edge for edge in MODULES.imports(module_name(path)) if edge.in_function]
    assert not inside, f"{module_name(path)} imports inside a function: " + ", ".join(
        f"{edge.target} (line {edge.line})" for edge in inside)


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


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_each_layer_imports_only_those_below_it(name):
    forbidden = FORBIDDEN.get(_layer(name), set())
    wrong = sorted(target for target in GRAPH[name] if _layer(target) in forbidden)
    assert not wrong, f"{name} ({_layer(name)}) imports {wrong}"


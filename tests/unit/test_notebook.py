"""examples/lab.ipynb, the worked notebook of the lab's Python API (docs/api.md): it runs top to bottom in a
kernel of this environment (nbclient) and draws the app's own figures, the Start page's RoPE-against-learned
picture and the Dilution page's chart among them, through lengen.api alone."""

from __future__ import annotations

import ast
import base64
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "lab.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"
CELL_SECONDS = 300  # a cell's limit: the one training is about a second on an idle core, far longer on a loaded one


def _code(notebook: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def test_the_notebook_is_kept_without_outputs_and_reaches_the_lab_through_the_api_alone():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    imported = set()
    for source in _code(notebook):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                imported.add(node.module or "")
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
    lab = {name for name in imported if name.split(".")[0] in {"lengen", "lengen_core", "ui", "pages"}}
    assert lab == {"lengen", "ui.charts"}  # the API, and the plotly builders every client draws with


@pytest.fixture(scope="module")
def executed() -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")  # one torch thread in the kernel, as in every test process
        NotebookClient(notebook, timeout=CELL_SECONDS, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute()  # a failing cell raises
    return notebook


def _figures(notebook: nbformat.NotebookNode) -> dict[str, dict]:
    """title -> figure of every plotly figure the notebook drew."""
    found = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            figure = output.get("data", {}).get(PLOTLY)
            if figure is not None:
                found[figure["layout"]["title"]["text"]] = figure
    return found


def _values(data: list | dict) -> np.ndarray:
    """A trace's numbers as plotly wrote them: a list, or a typed array in base64 ({"dtype", "bdata"})."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
    return np.asarray(data, dtype=float)


def test_the_notebook_runs_top_to_bottom_and_draws_the_start_and_dilution_figures(executed):
    figures = _figures(executed)
    start = figures["The three presets: accuracy against length"]  # the Start page's picture
    curves = {trace["name"]: trace for trace in start["data"] if trace.get("mode") == "markers+lines"}
    assert set(curves) == {"RoPE", "Learned (APE)", "RoPE + linear attention"}
    assert _values(curves["RoPE"]["y"]).min() > 0.9 and _values(curves["Learned (APE)"]["y"])[1:].max() < 0.2  # C1
    dilution = figures["RoPE preset: accuracy and target mass against length"]
    assert {"accuracy measured", "p predicted", "p fitted law"} <= {trace["name"] for trace in dilution["data"]}
    assert "A tiny RoPE head of my own" in figures and "Target mass under log-n scaling" in figures
    errors = [output for cell in executed.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors

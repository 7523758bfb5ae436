"""Thin pages (issue 41): a file in pages/ is what the router (app.py) names, its title and lead, and a storyboard of
calls into ui/, which draws the layout, shapes the tables and holds the prose (ui.views, one module a page). The
bounds below are checked against every page the router serves, so a page that grows its own layout fails here and
the code goes to ui/ instead."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ui.lessons.view import LESSON_PAGE

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "pages").glob("*.py"))
MAX_STATEMENTS = 16  # the storyboard's statements, imports aside (the longest, Compare's, has 15)
MAX_STREAMLIT_CALLS = 1  # besides st.title: one message or one container to draw into, no layout or prose
LAYOUT = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.For, ast.AsyncFor, ast.While,
          ast.With, ast.AsyncWith)  # a function, a loop or a block to draw in belongs in ui/
HEAVY = {"numpy", "pandas", "plotly", "torch"}  # tables, figures and tensors are shaped in ui/ and lengen_core/
PREAMBLE = {"selected_run", "require_length_task", "require_single_head", "run_summary"}  # ui.views.preamble's
RUN_PAGES = {"attention", "carrier", "dilution"}  # the pages that open one run along the length


def _tree(page: Path) -> ast.Module:
    return ast.parse(page.read_text(encoding="utf-8"))


def _statements(tree: ast.Module) -> list[ast.stmt]:
    """Every statement but the imports and the module's docstring, nested ones included."""
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    return [node for top in body for node in ast.walk(top)
            if isinstance(node, ast.stmt) and not isinstance(node, ast.Import | ast.ImportFrom)]


def _calls(tree: ast.Module) -> list[str]:
    """The names each call in the page calls: 'st.title', 'attention.maps', 'page_run'."""
    return [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_every_page_the_router_serves_is_held_to_the_bounds() -> None:
    routed = set(re.findall(r'st\.Page\("(pages/\w+\.py)"', (ROOT / "app.py").read_text(encoding="utf-8")))
    assert {str(page.relative_to(ROOT)) for page in PAGES} == routed | {LESSON_PAGE}
    assert len(PAGES) == 11


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_page_is_a_short_storyboard(page: Path) -> None:
    statements = _statements(_tree(page))
    assert len(statements) <= MAX_STATEMENTS, (f"{page.name} has {len(statements)} statements (at most "
                                               f"{MAX_STATEMENTS}): move its layout into ui/views/{page.stem}.py")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_page_defines_no_function_and_lays_nothing_out(page: Path) -> None:
    tree = _tree(page)
    found = [f"line {node.lineno}: {type(node).__name__}" for node in ast.walk(tree) if isinstance(node, LAYOUT)]
    assert not found, f"{page.name} draws its own layout; move it into ui/: {found}"
    streamlit = [name for name in _calls(tree) if name.startswith("st.") and name != "st.title"]
    assert len(streamlit) <= MAX_STREAMLIT_CALLS, f"{page.name} calls Streamlit itself: {streamlit}"
    assert _calls(tree).count("st.title") == 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_page_shapes_no_table_or_figure(page: Path) -> None:
    imported = {alias.name.split(".")[0] for node in ast.walk(_tree(page)) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(_tree(page))
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & HEAVY, f"{page.name} imports {sorted(imported & HEAVY)}"


def test_the_run_pages_open_their_run_with_the_one_preamble() -> None:
    for page in PAGES:
        calls = _calls(_tree(page))
        assert not PREAMBLE & set(calls), f"{page.name} writes the preamble out: {sorted(PREAMBLE & set(calls))}"
        assert ("page_run" in calls) == (page.stem in RUN_PAGES), page.name

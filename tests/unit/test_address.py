"""ui.address: a run's URL changes are written at its end in one step, a page that stops early writes them first,
and no page calls st.stop() itself (after a stop is asked for, Streamlit sends no other message of the run)."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def _changes_then_end() -> None:
    import streamlit as st

    from ui.address import drop_from_link, in_link, set_in_link, write_link

    set_in_link("seed", "3")
    set_in_link("seed", "4")  # the last change wins
    set_in_link("compare", ["a", "b"])
    drop_from_link("term")
    st.write(f"seed in link: {in_link('seed')}")  # what the run leaves, before it is written
    st.write(f"address before the end: {sorted(st.query_params)}")
    write_link()


def _changes_then_stop() -> None:
    import streamlit as st

    from ui.address import set_in_link, stop

    set_in_link("section", "glossary")
    stop()
    st.write("not drawn")


def test_a_runs_changes_reach_the_address_at_its_end_and_not_before() -> None:
    app = AppTest.from_function(_changes_then_end)
    app.query_params.update({"term": "carrier", "offset": "3"})
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    said = [m.value for m in app.markdown]
    assert "seed in link: ['4']" in said
    assert "address before the end: ['offset', 'term']" in said  # nothing was written as the run went
    assert app.query_params == {"offset": "3", "seed": "4", "compare": ["a", "b"]}


def test_a_page_that_stops_early_writes_its_link_first() -> None:
    app = AppTest.from_function(_changes_then_stop)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.query_params == {"section": "glossary"}
    assert not [m for m in app.markdown if m.value == "not drawn"]


def test_no_page_or_ui_module_calls_st_stop_itself() -> None:
    """Each st.stop() would lose the run's link (ui.address.stop writes it first)."""
    callers = [str(path.relative_to(ROOT)) for folder in ("pages", "ui") for path in (ROOT / folder).rglob("*.py")
               if re.search(r"\bst\.stop\(\)", path.read_text(encoding="utf-8")) and path.name != "address.py"]
    callers += ["app.py"] if re.search(r"\bst\.stop\(\)", (ROOT / "app.py").read_text(encoding="utf-8")) else []
    assert callers == [], callers

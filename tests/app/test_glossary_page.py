"""The Theory page's glossary and its link settings, and the plain lead on every page, through AppTest."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.glossary import ENTRIES, GLOSSARY_ANCHOR, LEADS

APP = str(Path(__file__).resolve().parents[2] / "app.py")
THEORY = "pages/theory.py"


def open_link(params: dict[str, str], page: str = THEORY, run_id: str | None = "default") -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    if run_id != "default":
        app.session_state["run_id"] = run_id
    app.run()
    app.switch_page(page)
    app.query_params.update(params)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def positions(app: AppTest) -> tuple[int, int]:
    inputs = {n.label: n.value for n in app.number_input}
    return inputs["Query position t"], inputs["Key position u"]


def test_theory_renders_every_glossary_entry_under_its_anchor() -> None:
    app = open_link({"section": "glossary"})
    anchors = {h.proto.anchor: h.value for h in app.subheader}
    for item in ENTRIES:
        assert anchors.get(item.anchor) == item.title
    assert any(h.proto.anchor == GLOSSARY_ANCHOR for h in app.header)
    shown = " ".join(m.value for m in app.markdown)
    assert all(item.text in shown for item in ENTRIES)


def test_the_glossary_renders_with_no_run_selected() -> None:
    app = open_link({"section": "glossary"}, run_id=None)
    assert {h.proto.anchor for h in app.subheader} >= {item.anchor for item in ENTRIES}


def test_t_and_u_reopen_from_the_link_and_go_back_into_it() -> None:
    app = open_link({"t": "100", "u": "40"})
    assert positions(app) == (100, 40)
    assert app.query_params["t"] == "100" and app.query_params["u"] == "40"
    app.number_input(key="theory-u").set_value(7).run()
    assert positions(app) == (100, 7)
    assert app.query_params["u"] == "7" and app.query_params["t"] == "100"


def test_without_a_link_t_and_u_start_at_the_last_query_and_its_target() -> None:
    app = open_link({"section": "live-check"})
    assert positions(app) == (15, 12)  # the RoPE preset: L_train 16, k 3
    assert app.query_params["t"] == "15" and app.query_params["u"] == "12"


def test_a_bad_position_in_the_link_is_a_message_and_keeps_the_default() -> None:
    app = open_link({"t": "5000"})  # positions without a section: the live check
    assert "'t'" in " ".join(w.value for w in app.warning).replace("\\", "")
    assert positions(app) == (15, 12)


def test_t_and_u_outlive_a_visit_to_another_tab() -> None:
    app = open_link({"t": "100", "u": "40"})  # a link with positions and no section opens the live check
    assert app.session_state["theory-section"] == "Live check (C3)"
    app.session_state["theory-section"] = "Glossary"
    app.run()
    assert not app.number_input and "t" not in app.query_params
    app.session_state["theory-section"] = "Live check (C3)"
    app.run()
    assert positions(app) == (100, 40) and app.query_params["t"] == "100"


def test_a_term_link_opens_the_glossary_tab_and_scrolls_once() -> None:
    app = open_link({"term": "toeplitz-fraction"})
    assert app.session_state["theory-section"] == "Glossary" and app.query_params["section"] == "glossary"
    assert "term" not in app.query_params  # the address a reader copies stays clean
    scripts = [e for e in app.get("html") if "toeplitz-fraction" in e.proto.body]
    assert len(scripts) == 1 and 'getElementById("toeplitz-fraction")' in scripts[0].proto.body
    app.run()  # a rerun (a widget changed) does not scroll again
    assert not [e for e in app.get("html") if "scrollIntoView" in e.proto.body]


def test_an_unknown_term_is_dropped_without_a_script() -> None:
    app = open_link({"term": '"></script><script>alert(1)//'})
    assert "term" not in app.query_params
    assert not [e for e in app.get("html") if "scrollIntoView" in e.proto.body]


@pytest.mark.parametrize("page", sorted(LEADS))
def test_every_page_shows_its_lead(page: str) -> None:
    app = open_link({}, page=f"pages/{page}.py", run_id=None)
    assert any(m.value == LEADS[page] for m in app.markdown)

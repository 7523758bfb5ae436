"""A glossary link (`?term=`) that names no entry is told so, with the nearest entries and where all are
listed, and the page still works; one that names an entry by its title, in any case, opens it."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.glossary import ENTRIES, unknown_term

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_theory(params: dict[str, str]) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/theory.py")
    app.query_params.update(params)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def warnings(app: AppTest) -> str:
    return " ".join(w.value for w in app.warning).replace("\\", "")  # (markdown escapes undone)


def test_an_unknown_term_says_so_and_opens_the_glossary_that_lists_every_term() -> None:
    app = open_theory({"term": "bogus"})
    said = warnings(app)
    assert "“bogus”" in said and "does not have" in said and f"all {len(ENTRIES)} terms" in said
    assert app.session_state["theory-section"] == "Glossary"
    assert {h.proto.anchor for h in app.subheader} >= {item.anchor for item in ENTRIES}  # the list it points to
    assert "term" not in app.query_params
    assert not [e for e in app.get("html") if "scrollIntoView" in e.proto.body]
    app.session_state["theory-section"] = "Derivations (C3, C5, C6)"  # the page still works, and says it once
    app.run()
    assert not app.exception and app.header[0].value.startswith("1.") and not warnings(app)


def test_a_misspelt_term_is_offered_the_nearest_entries() -> None:
    app = open_theory({"term": "Carier"})
    assert "Did you mean Carrier" in warnings(app)


def test_a_hostile_term_is_shown_cut_short_and_as_text() -> None:
    hostile = "[click](https://example.org) " + "x" * 500
    said = unknown_term(hostile)
    assert len(said) < 400 and "x" * 41 not in said
    app = open_theory({"term": hostile})
    assert app.warning and "https://example.org" in warnings(app)  # shown, not linked: escaped for markdown
    assert "[click](https" not in app.warning[0].value


def test_a_term_named_by_its_title_opens_its_entry() -> None:
    app = open_theory({"term": "Toeplitz Fraction"})
    assert not app.warning and app.session_state["theory-section"] == "Glossary"
    assert [e for e in app.get("html") if 'getElementById("toeplitz-fraction")' in e.proto.body]

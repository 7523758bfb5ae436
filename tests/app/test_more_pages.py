"""Compare, Theory and Transformer render without an exception, and the equivariance check tells
RoPE (a difference at round-off) from a learned table (a difference of whole logits)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.presets import DEFAULT_PRESET, preset_ids

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGES = ["pages/compare.py", "pages/theory.py", "pages/transformer.py"]
DEFAULT = object()


def open_page(page: str, run_id: object = DEFAULT, link: dict[str, str] | None = None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    if run_id is not DEFAULT:
        app.session_state["run_id"] = run_id
    app.run()
    app.switch_page(page)
    app.query_params.update(link or {})
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]
    return app


def metric(app: AppTest, label: str) -> str:
    return next(m.value for m in app.metric if m.label == label)


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_with_no_run(page: str) -> None:
    open_page(page, run_id=None)


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_with_a_run_missing_from_the_store(page: str) -> None:
    open_page(page, run_id="rope-softmax-retrieval-s0-000000000000")


def test_compare_overlays_the_three_single_head_presets() -> None:
    app = open_page("pages/compare.py")
    assert len(app.multiselect[0].value) == 3
    assert len(app.get("plotly_chart")) == 3
    numbers = app.table[0].value  # a row per quantity (the index), a column per run: it fits the page
    assert len(numbers.columns) == 3
    assert list(numbers.loc["encoding"]) == ["rope", "learned", "rope"]
    assert numbers.loc["layers × heads"].tolist() == ["single head"] * 3
    assert numbers.loc["argmax Δ"].iloc[0] == "3"
    assert float(numbers.loc["accuracy at 4×"].iloc[0]) > 0.9
    assert float(numbers.loc["accuracy at 4×"].iloc[1]) < 0.3


def test_compare_with_no_run_picked_says_so() -> None:
    app = open_page("pages/compare.py")
    app.multiselect[0].set_value([]).run()
    assert any("at least one run" in i.value for i in app.info)


@pytest.mark.parametrize("label, holds", [(DEFAULT_PRESET, True), ("Learned (APE)", False),
                                          ("Transformer RoPE", True), ("Transformer learned", False)])
def test_theory_equivariance_check(label: str, holds: bool) -> None:
    app = open_page("pages/theory.py", preset_ids()[label], {"section": "live-check"})
    worst = float(metric(app, "Largest difference over the shifts"))
    if holds:
        assert worst < 1e-3
        assert metric(app, "Logit depends on t − u alone") == "yes"
    else:
        assert worst > 0.1
        assert metric(app, "Logit depends on t − u alone") == "no"
    assert app.get("plotly_chart")


def test_theory_shows_the_labs_science_document_in_its_tab_only() -> None:
    from lengen.presets import SCIENCE_DOCUMENT

    app = open_page("pages/theory.py")
    science = SCIENCE_DOCUMENT.read_text(encoding="utf-8").strip()
    assert not [m for m in app.markdown if m.value == science]  # another tab: its 69 kB are not sent
    app.session_state["theory-section"] = "Science document"  # what clicking the tab does: the page reruns
    app.run()
    (shown,) = [m.value for m in app.markdown if m.value == science]
    assert "## 4. The verdict on every run" in shown


def test_theory_draws_only_the_chosen_tab_and_a_person_can_go_from_one_to_the_next() -> None:
    from ui.theory.sections import SECTIONS

    app = open_page("pages/theory.py")
    assert [t.label for t in app.tabs] == list(SECTIONS.values())
    assert [h.value[:2] for h in app.header] == ["1.", "2.", "3."]  # the derivations, and nothing else
    assert not app.get("plotly_chart") and not app.metric and app.query_params["section"] == "derivations"
    numbers = {"live-check": ["4."], "optimisation": ["5."], "rasp-l": ["6."], "glossary": ["7."], "science": ["8."]}
    for name, headers in numbers.items():
        app.session_state["theory-section"] = SECTIONS[name]
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        assert [h.value[:2] for h in app.header] == headers, name
        assert app.query_params["section"] == name
    assert "t" not in app.query_params  # the link holds what is shown: the positions only with their tab


def test_a_bad_section_in_the_link_is_a_message_and_opens_the_derivations() -> None:
    app = open_page("pages/theory.py", link={"section": "proofs"})
    warning = " ".join(w.value for w in app.warning).replace("\\", "")
    assert "'section' is 'proofs'" in warning and "live-check" in warning
    assert [h.value[:2] for h in app.header] == ["1.", "2.", "3."]


def test_transformer_page_offers_presets_for_a_single_head_run() -> None:
    app = open_page("pages/transformer.py")
    assert any("minimal single head" in i.value for i in app.info)
    app.button(key="open-Transformer RoPE").click().run()
    assert app.session_state["run_id"] == preset_ids()["Transformer RoPE"]
    assert not app.exception, [e.value for e in app.exception]
    assert len(app.get("plotly_chart")) >= 6


@pytest.mark.parametrize("label, carrier, pinned", [("Transformer RoPE", True, False),
                                                    ("Transformer learned", True, True)])
def test_transformer_page_finds_carrier_and_pinned_heads(label: str, carrier: bool, pinned: bool) -> None:
    app = open_page("pages/transformer.py", preset_ids()[label])
    assert len(app.get("plotly_chart")) >= 6
    assert (not metric(app, "Carrier heads").startswith("0 ")) == carrier
    assert (not metric(app, "Pinned heads").startswith("0 ")) == pinned
    heads_table = next(d.value for d in app.dataframe if "argmax_offset" in d.value.columns)
    assert (heads_table["argmax_offset"] == 3).any()


@pytest.mark.parametrize("page", ["pages/carrier.py", "pages/dilution.py"])
def test_single_head_pages_point_a_transformer_run_to_the_transformer_page(page: str) -> None:
    app = open_page(page, preset_ids()["Transformer RoPE"])
    assert any("Transformer page" in info.value for info in app.info)


def test_the_start_pages_c9_link_opens_theory_at_the_rasp_l_tab() -> None:
    from ui.theory.sections import SECTIONS

    app = open_page("pages/start.py")
    (link,) = [p.proto for p in app.get("page_link") if p.proto.label.startswith("**C9**")]
    assert link.page == "theory" and link.query_string == "section=rasp-l" and "rasp-l" in SECTIONS
    theory = open_page("pages/theory.py", link={"section": "rasp-l"})
    assert [h.value for h in theory.header] == ["6. The RASP-L view (C9)"]

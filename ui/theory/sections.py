"""The Theory page's sections as tabs, of which only the chosen one is computed and sent.

Drawn whole, the page took a browser 4–6 CPU seconds: its derivations' math, the live check's and the
optimisation experiment's four charts and the glossary's 80 elements, all laid out at once
(bench/README.md, "Where a switch's seconds go"). As tabs that rerun the page when chosen
(`st.tabs(on_change="rerun")`), a visit draws the derivations alone and each other section is one
click away. The chosen tab travels in the link (`?section=live-check`), a glossary link (`?term=`)
opens the glossary tab (one that names no entry says so above it), and an older link that names
positions (`t`, `u`) but no section opens the live check they belong to.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lengen.share import view_choice
from ui.address import drop_from_link
from ui.glossary import TERM_PARAM, linked_entry, unknown_term
from ui.state import plain, show_view, view_setting

SECTION_PARAM = "section"
SECTION_KEY = "theory-section"
SECTIONS = {  # the link's value -> the tab's label, in the page's order
    "derivations": "Derivations (C3, C5, C6)",
    "live-check": "Live check (C3)",
    "optimisation": "Learned positions (C1)",
    "rasp-l": "RASP-L (C9)",
    "glossary": "Glossary",
    "science": "Science document",
}
KEPT = {"theory-t": "t", "theory-u": "u"}  # the live check's positions (widget key: link name), kept while another tab is shown


def _from_link(params: dict[str, list[str]]) -> str:
    return SECTIONS[view_choice(params, SECTION_PARAM, list(SECTIONS), "derivations")]


def section_tabs() -> tuple[str, DeltaGenerator]:
    """Draw the tabs; return the chosen one's name and the tab to draw it in (the others stay empty)."""
    for key in KEPT:  # a widget not drawn in a run loses its state: the live check's t and u outlive the other tabs
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    positions_only = {"t", "u"} & set(st.query_params) and SECTION_PARAM not in st.query_params
    if linked_entry() is not None:  # a link to a glossary entry opens the glossary, which scrolls to it
        st.session_state[SECTION_KEY] = SECTIONS["glossary"]
    elif TERM_PARAM in st.query_params:  # an entry that does not exist: said, the glossary opened at its list
        st.warning(plain(unknown_term(st.query_params[TERM_PARAM])), icon=":material/link_off:")
        st.session_state[SECTION_KEY] = SECTIONS["glossary"]
        drop_from_link(TERM_PARAM)
    view_setting(SECTION_KEY, SECTION_PARAM, _from_link, SECTIONS["live-check" if positions_only else "derivations"])
    tabs = dict(zip(SECTIONS, st.tabs(list(SECTIONS.values()), key=SECTION_KEY, on_change="rerun")))
    chosen = next((name for name, tab in tabs.items() if tab.open), "derivations")
    show_view(SECTION_PARAM, chosen)
    if chosen != "live-check":  # the link holds what is shown: the positions come back with their tab
        for name in KEPT.values():
            show_view(name, None)
    return chosen, tabs[chosen]

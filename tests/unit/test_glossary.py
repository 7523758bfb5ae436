"""The plain leads and the glossary: every page has its lead, every linked term has an entry, and the
numbers and claims the texts make are the code's."""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import pytest

from lengen_core.analysis import carrier, equivariance, evaluate, fit, verdict
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.initial import initial_model
from lengen_core.thresholds import ACCURACY_BAR
from ui import glossary, runs

PAGES = sorted((Path(__file__).resolve().parents[2] / "pages").glob("*.py"))
LINK = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
ANCHORS = {item.anchor for item in glossary.ENTRIES}
REQUIRED = [  # the terms the pages use before explaining them (issue 12)
    "carrier", "offset", "training length", "target mass", "dilution", "m_out", "dilution law", "Toeplitz fraction",
    "effective rank", "alignment", "near-recurrence", "Wilson interval", "chance", "verdict", "RoPE",
    "learned positions", "sinusoidal", "NoPE", "ALiBi", "linear attention", "equivariance", "pooling",
    "retrieval task", "shift task", "extrapolation",
]


def plain(markdown: str) -> str:
    """The text a reader sees: links as their words, no emphasis."""
    return LINK.sub(r"\1", markdown).replace("**", "")


def sentences(markdown: str) -> int:
    return len(SENTENCE_END.findall(plain(markdown).strip()))


def all_text() -> str:
    return " ".join([*(item.text for item in glossary.ENTRIES), *glossary.LEADS.values()])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_page_draws_its_lead_right_under_its_title(page: Path) -> None:
    lines = [line.strip() for line in page.read_text().splitlines()]  # Lessons: the index's title, in a branch
    title = next(i for i, line in enumerate(lines) if line.startswith("st.title("))
    assert lines[title + 1] == f'lead("{page.stem}")'
    assert "from ui.glossary import" in page.read_text() and "lead" in page.read_text()


def test_there_is_a_lead_for_every_page_and_no_other() -> None:
    assert set(glossary.LEADS) == {page.stem for page in PAGES}


@pytest.mark.parametrize("page", sorted(glossary.LEADS))
def test_every_lead_is_two_sentences(page: str) -> None:
    assert sentences(glossary.LEADS[page]) == 2, plain(glossary.LEADS[page])


@pytest.mark.parametrize("page", sorted(glossary.LEADS))
def test_every_term_a_lead_links_resolves_to_an_entry_with_an_anchor(page: str) -> None:
    links = LINK.findall(glossary.LEADS[page])
    assert len(links) >= 3, "a lead links the jargon it uses"
    for words, target in links:  # Theory's own too: its glossary is a tab, which the link opens
        match = re.fullmatch(r"/theory\?term=([\w-]+)#([\w-]+)", target)
        assert match and match[1] == match[2] and match[1] in ANCHORS, (words, target)


def test_the_required_terms_have_entries_and_term_links_them() -> None:
    for name in REQUIRED:
        anchor = glossary.entry(name).anchor
        assert glossary.term(name) == f"[{name}](/theory?term={anchor}#{anchor})"
    assert glossary.term("Toeplitz fraction") == "[Toeplitz fraction](/theory?term=toeplitz-fraction#toeplitz-fraction)"
    assert glossary.term("m_out", "far margin") == "[far margin](/theory?term=m-out#m-out)"
    with pytest.raises(KeyError, match="no glossary entry 'perplexity'"):
        glossary.term("perplexity")


def test_entries_are_short_plain_and_unique() -> None:
    assert len(ANCHORS) == len(glossary.ENTRIES)
    assert len({item.title.casefold() for item in glossary.ENTRIES}) == len(glossary.ENTRIES)
    for item in glossary.ENTRIES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", item.anchor), item.anchor
        assert item.title.strip() and item.text.strip(), item.anchor
        assert 1 <= sentences(item.text) <= 2, (item.anchor, plain(item.text))
        assert "$" not in item.text, "a dollar sign would start LaTeX in st.markdown"


def test_the_anchor_is_the_url_path_of_the_theory_page() -> None:
    """st.navigation infers a page's url path from its file name; app.py routes pages/theory.py."""
    app = (Path(__file__).resolve().parents[2] / "app.py").read_text()
    assert 'st.Page("pages/theory.py"' in app and "url_path" not in app
    assert glossary.GLOSSARY_PAGE == "/theory"


@pytest.mark.parametrize("words, value", [
    ("at least 0.9 accuracy", ACCURACY_BAR == 0.9),
    ("over 2,048 answers", verdict.VERDICT_ANSWERS == 2_048),
    ("within 0.02 of chance", verdict.CHANCE_TOLERANCE == 0.02),
    ("margin of at least 1 nat", carrier.ALIGNMENT_MARGIN == 1.0),
    ("keep 99% of the energy", carrier.RANK_ENERGY == 0.99),
    ("at least 1% of the largest", carrier.ACTIVE_AMPLITUDE == 0.01),
    ("within ln 4 of the target's", math.isclose(carrier.RECURRENCE_GAP, math.log(4))),
    ("at least a quarter of the target's weight", math.isclose(math.exp(-carrier.RECURRENCE_GAP), 0.25)),
    ("(within 10% or not)", fit.LAW_TOLERANCE == 0.10),
    ("fits the law where p > 2/V", fit.FLOOR_TIMES_CHANCE == 2.0),
    ("at most 256 × 256 cells", inspect.signature(runs.heatmap).parameters["max_cells"].default == 256),
    ("z = 1.96", inspect.signature(evaluate.wilson_interval).parameters["z"].default == 1.96),
    ("shifts up to 10^6", max(equivariance.SHIFTS) == 10**6),
    ("a table of 4,096 rows by default", RunConfig().model.max_positions == 4_096),
    ("1/16 = 0.0625 in the presets", RunConfig().task.vocab_size == 16),
    ("(3 in the presets)", RunConfig().task.offset == 3),
])
def test_the_numbers_the_texts_quote_are_the_codes(words: str, value: bool) -> None:
    assert words in plain(all_text())
    assert value


def test_a_learned_tables_carrier_is_only_claimed_over_the_training_range() -> None:
    """The carrier entry says a learned table's carrier covers the training range only: so does the code."""
    config = with_changes(RunConfig(), encoding="learned", train_length=8, offset=2, d_model=16)
    result = carrier.extract_carrier(initial_model(config), config, search_length=64)
    assert len(result.offsets) == config.task.train_length
    assert "for a learned table only over the training range" in plain(glossary.entry("carrier").text)


@pytest.mark.parametrize("page", sorted(glossary.LEADS))
def test_leads_claim_every_length_only_for_a_relative_rule(page: str) -> None:
    """'At every length' holds for RoPE (and a relative rule), never for learned positions past training."""
    for sentence in re.split(r"(?<=[.!?])\s+", plain(glossary.LEADS[page])):
        if re.search(r"\b(every|any) length\b", sentence):
            assert re.search(r"RoPE|relative rule", sentence), sentence
            assert "learned" not in sentence.split("while")[0], sentence

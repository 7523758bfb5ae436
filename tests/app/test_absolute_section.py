"""The Transformer page's section on where absolute position comes from: drawn for a transformer run, its
captions computed from the run (the claim stated where it holds and where it does not)."""

from __future__ import annotations

import pytest

from lengen.presets import preset_ids
from tests.app.test_more_pages import open_page

pytestmark = pytest.mark.slow  # a whole Transformer page with its probes: tests/unit/test_absolute.py has the quick captions


def captions(app) -> str:
    return " ".join(c.value for c in app.caption)


@pytest.fixture(scope="module")
def rope_page():
    return open_page("pages/transformer.py", preset_ids()["Transformer RoPE"])


def test_the_section_draws_the_sink_the_probe_and_the_denominators(rope_page) -> None:
    titles = [c.proto.spec for c in rope_page.get("plotly_chart")]
    for title in ("The sink", "Position probe", "The mask's share"):
        assert any(title in spec for spec in titles), title
    table = next(d.value for d in rope_page.dataframe if "intervention" in d.value.columns)
    assert len(table) == 6 and set(table["length"]) == {16, 64}


def test_the_captions_say_where_the_claim_holds_and_where_it_does_not(rope_page) -> None:
    text = captions(rope_page)
    assert "At L = 64, the probe beats its untrained baseline" in text
    assert "At L = 16, the probe falls short of its untrained baseline" in text
    assert "This contradicts §12 (training puts absolute position" in text  # the claim named, with its words
    assert "The lengths disagree, so quote the length with §12." in text
    assert "Nothing moved, as relative logits must" in text  # RoPE: the shift changes nothing
    assert "No head reads the sink" in text


def test_a_learned_table_is_changed_by_the_shift() -> None:
    app = open_page("pages/transformer.py", preset_ids()["Transformer learned"])
    text = captions(app)
    assert "The encoding hands the model absolute positions" in text
    assert "exact sums" not in text  # no per-token carriers: no exact denominator is claimed

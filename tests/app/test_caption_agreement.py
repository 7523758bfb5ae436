"""Captions that agree with their page and are short (issue 40 §5). Over the retrieval presets and a few fresh tiny
runs at non-default settings, the Dilution page: never says both that dilution limits a run and that it has no
dilution regime (one verdict, ui.captions.regime, read by every caption); names the claim wherever it says a run
contradicts one; and writes each caption's lead in at most two sentences and LEAD_CHARS characters, the rest in
an expander."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen_core.claims import CLAIMS, SECTION_CLAIMS
from lengen_core.config import RunConfig, with_changes
from lengen_core.serving.store import RunStore
from lengen_core.serving.training_process import save_run
from lengen_core.training import train
from ui.captions.common import LEAD_CHARS, LEAD_SENTENCES, sentence_count
from ui.presets import preset_ids

pytestmark = pytest.mark.slow  # trains four tiny runs and opens seven pages: tests/unit/test_captions.py is quick

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PRESETS = ("RoPE", "Learned (APE)", "RoPE + linear attention")
TINY = with_changes(RunConfig(), vocab_size=8, train_length=8, offset=2, d_model=32, steps=300, seed=3)
FRESH = {  # each at settings no preset has: offset, vocabulary, length
    "learned": with_changes(TINY, encoding="learned", max_positions=256),
    "rope": with_changes(TINY, encoding="rope", vocab_size=12, train_length=12, offset=5),
    "linear": with_changes(TINY, encoding="rope", attention="linear"),
    "nope": with_changes(TINY, encoding="nope", offset=1, train_length=10),
}
DILUTED = ("attention limits (dilution", "the dilution regime, where the fitted law describes")
NOT_DILUTED = ("no dilution regime", "not by dilution")
CLAIM = re.compile("|".join(re.escape(code) for code in (*CLAIMS, *SECTION_CLAIMS)))


@pytest.fixture(scope="module")
def fresh() -> dict[str, str]:
    return {name: save_run(RunStore(), train(config, "cpu")) for name, config in FRESH.items()}


def dilution_page(run_id: str, longest: int) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.switch_page("pages/dilution.py")
    app.query_params.clear()
    app.query_params.update({"run": run_id, "longest": str(longest)})
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def plain(text: str) -> str:
    return text.replace("**", "").replace("`", "").replace("\\", "")


def leads_and_rest(app: AppTest) -> tuple[list[str], list[str]]:
    """The captions a person sees on the page, and those folded in its expanders."""
    folded = [plain(c.value) for expander in app.main.expander for c in expander.caption]
    shown = [plain(c.value) for c in app.main.caption]
    for text in folded:
        shown.remove(text)
    return shown, folded


def check(app: AppTest) -> None:
    shown, folded = leads_and_rest(app)
    page = " ".join(shown + folded)
    said = [phrase for phrase in DILUTED if phrase in page], [phrase for phrase in NOT_DILUTED if phrase in page]
    assert not (said[0] and said[1]), f"dilution both ways: {said}\n{page}"
    for sentence in re.split(r"(?<=[.!?])\s+", page):
        if "contradict" in sentence.lower() or "contrary to" in sentence:
            assert CLAIM.search(sentence), f"a contradiction names no claim: {sentence}"
    for text in shown:
        if text.startswith(("Run ", "Not defined for this run")):  # the run's summary; the rules' (ui/rules)
            continue
        assert sentence_count(text) <= LEAD_SENTENCES, f"{sentence_count(text)} sentences: {text}"
        assert len(text) <= LEAD_CHARS, f"{len(text)} characters: {text}"


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_dilution_captions_agree_and_lead_short(name) -> None:
    check(dilution_page(preset_ids()[name], 65_536))


@pytest.mark.parametrize("name", list(FRESH))
def test_a_fresh_runs_dilution_captions_agree_and_lead_short(fresh, name) -> None:
    check(dilution_page(fresh[name], 2_048))

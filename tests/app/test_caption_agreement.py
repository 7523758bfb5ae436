"""Captions that agree with their page and are short (issue 40 §5). Over the presets and a few fresh tiny runs at
non-default settings, every page with captions (Start, Attention, Carrier, Dilution, Compare, Transformer): names the
claim wherever it says a run contradicts one; writes each caption's lead in at most two sentences and LEAD_CHARS
characters, the rest in an expander; and never says one fact both ways on one page. The pairs tested (`PAIRS`,
`same_verdict_per_length`, `same_carrier_heads`):

- dilution: "the attention limits (dilution …" / "the dilution regime" against "no dilution regime" / "not by
  dilution" (ui.captions.regime: one verdict per run);
- learning: "Learned the task" (the verdict's banner) against "did not learn the task";
- the carrier: "aligned with k, as C5 says" against "NOT aligned with k" (ui.captions.readouts.carrier_verdict);
- RoPE past training: "holds its accuracy past the training length" / "stays near 1 at every length" against "does
  NOT hold its accuracy" / "does NOT stay near 1" (ui.captions.accuracy.past_verdict, read by both Transformer charts);
- a learned table past training: "on the first positions it never trained" against "does NOT drop to chance";
- the argmax trace at one length: "the slope-1 line of a relative rule" against "does NOT follow t − k", "pinned
  inside the training range" against "is NOT pinned" (the heatmap and the trace at the same L);
- a transformer head: "LxHy is a carrier head" against the head grid's list of carrier heads (HeadReport.is_carrier).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.presets import preset_ids
from lengen.store import RunStore
from lengen.training_process import save_run
from lengen_core.claims import CLAIMS, SECTION_CLAIMS
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from ui.captions.common import LEAD_CHARS, LEAD_SENTENCES, sentence_count

pytestmark = pytest.mark.slow  # trains four tiny runs and opens many pages: test_a_presets_attention_captions_agree is
# the quick representative (tests/app/test_caption_leads.py, fast tier), tests/unit/test_captions.py the unit checks

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
PAIRS = {  # one fact said both ways on one page: a contradiction
    "dilution": (DILUTED, NOT_DILUTED),
    "learning": (("Learned the task",), ("did not learn the task", "Did not learn the task")),
    "carrier": (("aligned with k, as C5 says",), ("NOT aligned with k",)),
    "RoPE past training": (("holds its accuracy past the training length", "stays near 1 at every length"),
                           ("does NOT hold its accuracy", "does NOT stay near 1")),
    "a table past training": (("on the first positions it never trained",), ("does NOT drop to chance",)),
}
CLAIM = re.compile("|".join(re.escape(code) for code in (*CLAIMS, *SECTION_CLAIMS)))
TRACE = re.compile(r"(L\dH\d: )?At L = ([\d,]+), past the training length[^:]*: (the slope-1 line|this RoPE run does NOT"
                   r"|pinned inside|this learned-position run is NOT|it follows|pinned to key|neither)")
CARRIER_HEADS = re.compile(r"carrier heads, here ([^;]*);")
A_CARRIER_HEAD = re.compile(r"(L\dH\d) is (not )?a carrier head")


@pytest.fixture(scope="module")
def fresh() -> dict[str, str]:
    return {name: save_run(RunStore(), train(config, "cpu")) for name, config in FRESH.items()}


def open_page(page: str, params: dict[str, str]) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.switch_page(f"pages/{page}.py")
    app.query_params.clear()
    app.query_params.update(params)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def dilution_page(run_id: str, longest: int) -> AppTest:
    return open_page("dilution", {"run": run_id, "longest": str(longest)})


def plain(text: str) -> str:
    return text.replace("**", "").replace("`", "").replace("\\", "")


def leads_and_rest(app: AppTest) -> tuple[list[str], list[str]]:
    """The captions a person sees on the page, and those folded in its expanders."""
    folded = [plain(c.value) for expander in app.main.expander for c in expander.caption]
    shown = [plain(c.value) for c in app.main.caption]
    for text in folded:
        shown.remove(text)
    return shown, folded


def banners(app: AppTest) -> list[str]:
    """The verdict's box and the page's notes: they state facts the captions must not contradict."""
    return [plain(e.value) for kind in ("success", "warning", "info", "error") for e in getattr(app.main, kind)]


def same_verdict_per_length(texts: list[str]) -> None:
    """The argmax trace at one length (one head) gets one verdict, whichever chart states it."""
    said: dict[tuple[str, str], set[str]] = {}
    for text in texts:
        for head, length, verdict in TRACE.findall(text):
            said.setdefault((head, length), set()).add(verdict)
    assert all(len(v) == 1 for v in said.values()), f"one trace, two verdicts: {said}"


def same_carrier_heads(page: str) -> None:
    """A head called a carrier head (or not) in its detail is one the head grid lists (or does not)."""
    listed = CARRIER_HEADS.search(page)
    if listed is None:
        return
    grid = {name.strip() for name in listed.group(1).split(",")} - {"none"}
    for name, negated in A_CARRIER_HEAD.findall(page):
        assert (name in grid) != bool(negated), f"{name}: grid lists {grid}, detail says {'not ' * bool(negated)}a carrier"


def check(app: AppTest, leads: bool = True) -> None:
    shown, folded = leads_and_rest(app)
    page = " ".join(banners(app) + shown + folded)
    for fact, (one, other) in PAIRS.items():
        said = [phrase for phrase in one if phrase in page], [phrase for phrase in other if phrase in page]
        assert not (said[0] and said[1]), f"{fact} both ways: {said}\n{page}"
    same_verdict_per_length(shown + folded)
    same_carrier_heads(page)
    for sentence in re.split(r"(?<=[.!?])\s+", page):
        if "contradict" in sentence.lower() or "contrary to" in sentence:
            assert CLAIM.search(sentence), f"a contradiction names no claim: {sentence}"
    for text in shown if leads else []:
        if text.startswith(("Run ", "Not defined for this run", "No inference rule here")):  # the run's summary; the
            # rules' list of why each is not defined for this run (ui/rules, one line a rule)
            continue
        assert sentence_count(text) <= LEAD_SENTENCES, f"{sentence_count(text)} sentences: {text}"
        assert len(text) <= LEAD_CHARS, f"{len(text)} characters: {text}"


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_dilution_captions_agree_and_lead_short(name) -> None:
    check(dilution_page(preset_ids()[name], 65_536))


@pytest.mark.parametrize("name", list(FRESH))
def test_a_fresh_runs_dilution_captions_agree_and_lead_short(fresh, name) -> None:
    check(dilution_page(fresh[name], 2_048))


SINGLE_HEAD_PAGES = ("attention", "carrier")


@pytest.mark.parametrize("page", SINGLE_HEAD_PAGES)
@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_single_head_pages_agree_and_lead_short(page, name) -> None:
    check(open_page(page, {"run": preset_ids()[name]}))


@pytest.mark.parametrize("page", SINGLE_HEAD_PAGES)
@pytest.mark.parametrize("name", list(FRESH))
def test_a_fresh_runs_single_head_pages_agree_and_lead_short(fresh, page, name) -> None:
    check(open_page(page, {"run": fresh[name]}))


@pytest.mark.parametrize("name", ["Transformer RoPE", "Transformer learned"])
def test_a_transformer_presets_page_agrees_and_leads_short(name) -> None:
    check(open_page("transformer", {"run": preset_ids()[name]}))


def test_start_agrees_and_leads_short() -> None:
    check(open_page("start", {}))


def compare_page(fresh: dict[str, str]) -> AppTest:
    ids = preset_ids()
    return open_page("compare", {"compare": ",".join([ids["RoPE"], ids["Learned (APE)"], fresh["rope"]])})


def test_compare_agrees_and_names_its_claims(fresh) -> None:
    check(compare_page(fresh), leads=False)


def test_compare_leads_short(fresh) -> None:
    check(compare_page(fresh))

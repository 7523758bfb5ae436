"""Plain words for the lab's jargon: a two-sentence lead on every page and the glossary, a tab of Theory.

Every term a page uses before explaining it has an entry here, with an anchor on the Theory page;
`term` links a term's first use to it ("[Toeplitz fraction](/theory#toeplitz-fraction)"), so a
teacher or a first-year student can look a word up from wherever they meet it. The texts follow
docs/science.md and the code that computes each quantity (lengen_core: carrier, fit, verdict,
evaluate, heatmap); a test pins the numbers they quote to the code's constants.

A markdown link that is not a bare "#anchor" opens in a new browser tab in Streamlit, so a term
opens the glossary beside the page the reader is on, Theory included (its glossary is a tab of its
own, not drawn while another tab is shown: ui.theory.sections). A fresh tab cannot rely on the "#anchor" alone:
Streamlit rewrites the address without its fragment as soon as the sidebar writes the run into the
query string, before the glossary is drawn, so the heading never sees it. The link therefore names
its entry in the query string too (`?term=<anchor>`), which opens Theory at its Glossary tab, and the
glossary scrolls to that entry once.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import streamlit as st

from lengen_core.thresholds import ACCURACY_BAR, ACTIVE_AMPLITUDE, CHANCE_TOLERANCE, LAW_TOLERANCE
from ui.address import drop_from_link

GLOSSARY_PAGE = "/theory"  # the url path Streamlit gives pages/theory.py (st.navigation infers it from the file name)
GLOSSARY_ANCHOR = "glossary"
TERM_PARAM = "term"  # the entry a link opens the glossary at


@dataclass(frozen=True)
class Entry:
    anchor: str  # the heading's anchor on the Theory page: /theory#<anchor>
    title: str
    text: str  # one or two plain sentences (markdown)


ENTRIES = (
    Entry("extrapolation", "Extrapolation (length generalisation)",
          "Doing the task on inputs longer than any seen in training. Here a model trained on sequences of length "
          "L_train is tested on sequences many times longer, up to about a million tokens on the Dilution page."),
    Entry("retrieval-task", "Retrieval task",
          "The default task: a sequence of random tokens, and the model must output the token k places before the "
          "last one. Only the last position is scored, and because the tokens are random only the position can tell "
          "the model where to look."),
    Entry("shift-task", "Shift task",
          "Every position t from k on must output the token k places before it, so the whole sequence is scored, "
          "not just its last position. The Transformer page uses it and reports accuracy by position and over the "
          "positions past the training length."),
    Entry("offset", "Offset k",
          "How far back the answer sits: the query at position t must fetch the token at position t − k. It is "
          "fixed for a run (3 in the presets) and smaller than the training length."),
    Entry("training-length", "Training length L_train",
          "The length of the training sequences (in sampled mode, the longest one). Positions past it are never "
          "seen in training, so what happens there is the test of length generalisation."),
    Entry("chance", "Chance 1/V",
          "The accuracy of a blind guess among the V tokens of the vocabulary: 1/16 = 0.0625 in the presets. "
          "Accuracy near it means the model does no better than guessing."),
    Entry("wilson-interval", "Wilson interval",
          "A 95% range for the true accuracy, given how many answers were scored (the Wilson score interval, "
          "z = 1.96); unlike the textbook ± formula it stays within 0 and 1. The shaded bands around accuracy "
          "curves are these intervals."),
    Entry("verdict", "Verdict: learned, at chance beyond",
          f"Every run is judged once, on fresh sequences: **learned** means at least {ACCURACY_BAR:g} accuracy at the training "
          "length over 2,048 answers, and **at chance beyond** means that at twice the training length the low end "
          f"of its Wilson interval is within {CHANCE_TOLERANCE:g} of chance. The pages make no law or carrier claim for a run that "
          "did not learn."),
    Entry("attention", "Query, key and score (logit)",
          "In attention each position, as a query, gives a score (the logit) to every key, the positions up to its "
          "own, and a softmax turns the scores into weights that sum to 1. Here the query at position t should put its weight "
          "on the key at t − k."),
    Entry("nat", "Nat",
          "The unit of the scores: a key scored 1 nat above another gets e ≈ 2.7 times its softmax weight. Margins "
          "and m_out are in nats."),
    Entry("argmax-key", r"Argmax key j\*(t)",
          "The key that the query at position t gives the most weight. A relative rule keeps it at t − k at every "
          "length (a line of slope 1 in the trace); a pinned head keeps it at one fixed position."),
    Entry("pinned", "Pinned head",
          "A head whose queries past the training length mostly look at one and the same key inside the training "
          "range, instead of k places back. Learned absolute positions do this here (C4): their rows past the training "
          "length were never trained."),
    Entry("carrier-head", "Carrier head",
          "In a transformer, a head whose measured carrier peaks at offset k and which puts on average at least "
          "half of its attention on the target key."),
    Entry("pooling", "Pooling (heatmaps)",
          "A long sequence's attention map has more query–key pairs than a screen has pixels, so it is shrunk to "
          "at most 256 × 256 cells: with pooling n×n (max) each cell shows the largest weight among the n × n "
          "pairs it covers. Pooling 1×1 means no shrinking, one cell per query and key; the argmax trace is always "
          "at full resolution."),
    Entry("target-mass", "Target mass p",
          "The share of the last query's attention that lands on the right key, t − k, averaged over the test "
          "sequences: 1 means all of it. For linear attention it is the target's share of the weights' sizes."),
    Entry("dilution", "Dilution",
          "Softmax weights sum to 1, so every extra key takes a little weight from the target even when the target "
          "still scores highest. Longer inputs therefore leave a smaller target mass p, and accuracy fades "
          "gradually rather than at once."),
    Entry("dilution-law", "Dilution law",
          "1/p(n) = 1/p(L_train) + (n − L_train)·e^(−m_out): past the training length each extra key adds the same "
          "small amount to 1/p. Far keys do not all weigh the same, so the Dilution page counts each by the weight "
          "the trained carrier gives it, K(n) in place of n − L_train, fits the law where p > 2/V and, by its "
          f"largest relative error (within {LAW_TOLERANCE:.0%} or not), says whether it describes the run."),
    Entry("m-out", "m_out (far margin)",
          "The fitted law's effective margin: how many nats the target's score stands, on average, above a far "
          "key's, so that the average far key weighs e^(−m_out) of the target. It comes with a 95% bootstrap interval and "
          "depends on the lengths and samples used, so compare values only at the same settings."),
    Entry("prediction", "Prediction from the weights",
          "Target mass and accuracy at each length computed from the trained weights alone, for random tokens, "
          "with nothing fitted to the measured points. The Dilution page draws it beside the measurements."),
    Entry("horizon", "Horizon",
          f"The largest length at which a run's accuracy stays at or above {ACCURACY_BAR:g}. Predicted from the weights to the token "
          "(by bisection, up to 2^20 tokens) and measured on the lengths evaluated; training a run longer can move it."),
    Entry("carrier", "Carrier s(Δ)",
          "The head's average score for a key Δ places before the query, averaged over every query and key token. "
          "With RoPE it is read from the weights at any Δ (analytic); for other encodings it is the expected "
          "score at each offset over random tokens, also computed from the weights (measured), and for a learned table only over the training range, whose rows alone "
          "were trained."),
    Entry("alignment", "Alignment and margin",
          "The margin is s(k) minus the largest s(Δ) at any other offset inside the training range. The carrier is "
          "aligned when it peaks at k by a margin of at least 1 nat: a peak at k by a hair selects nothing."),
    Entry("untrained-baseline", "Untrained baseline",
          "The same config and seed before any training, shown beside each carrier number with that number's range "
          "over 8 untrained initialisations of the config, all computed exactly from the weights. A trained number "
          "inside that range is no change: it is what the encoding gives for free, not what training did."),
    Entry("effective-rank", "Effective rank",
          "How many singular values it takes to keep 99% of the energy of the head's positional score matrix, "
          "after subtracting its overall mean. A small number means a simple pattern, not which kind: a RoPE carrier "
          "built from a few waves is low rank, and so is a head pinned to one absolute key (rank 1), while the "
          "Toeplitz fraction tells a relative rule from an absolute one."),
    Entry("spectrum", "Spectrum and active frequencies",
          "The carrier written as a sum of waves, with the amplitude of each frequency. A frequency is active when "
          f"its amplitude is at least {ACTIVE_AMPLITUDE:.0%} of the largest."),
    Entry("toeplitz-fraction", "Toeplitz fraction",
          "A Toeplitz matrix is constant along each diagonal, so its entries depend on t − u alone, and the fraction is "
          "the share of the mean-subtracted average score matrix at the training length kept when each diagonal is "
          "replaced by its mean, computed exactly from the weights. RoPE, NoPE and ALiBi heads are exactly 1 for any "
          "weights (equivariance, not a learned rule), while for a learned or sinusoidal table it shows "
          "absolute-position structure, read against the untrained range (untrained tables differ a lot)."),
    Entry("equivariance", "Equivariance",
          "Shifting the query and the key by the same number of positions leaves their score unchanged, so only "
          "their distance t − u matters. RoPE has it by construction (Theory checks it live for shifts up to 10^6); "
          "a learned position table does not."),
    Entry("near-recurrence", "Near-recurrence",
          "An offset Δ past the training length where, for some pair of tokens, the score comes back to within "
          "ln 4 of the target's, so a key there would get at least a quarter of the target's weight. RoPE only; "
          "the Carrier page lists them as data, not as a prediction of where accuracy drops."),
    Entry("rope", "RoPE (rotary position embedding)",
          "Positions enter by rotating each pair of query and key features by an angle proportional to the "
          "position, so a score depends only on the distance t − u. A rule learned on short inputs is therefore "
          "the same rule at any length."),
    Entry("learned-positions", "Learned absolute positions (APE)",
          "A trainable vector for each position (a table of 4,096 rows by default) added to each token's "
          "embedding. Rows for positions past the training length get no training signal and keep their random "
          "initial values."),
    Entry("sinusoidal", "Sinusoidal positions",
          "A fixed, untrained table of sines and cosines of the position (the original Transformer's), added to "
          "the embeddings. It is absolute like a learned table, but defined at every position."),
    Entry("nope", "NoPE (no positional encoding)",
          "No position information beyond the causal mask, which lets a query see only earlier keys. A single NoPE "
          "head gives every key holding the same token the same score, so it cannot pick out the key k places back."),
    Entry("alibi", "ALiBi",
          "A penalty on each score that grows linearly with the distance t − u, with its own slope per head. One "
          "ALiBi head favours the nearest keys and cannot select an offset k > 0; several heads can combine slopes."),
    Entry("linear-attention", "Linear attention",
          "Attention without the softmax: the scores themselves are the weights, and nothing makes them sum to 1. "
          "The lab uses it as the control (C7) for what the softmax's normalisation does to length generalisation."),
    Entry("claims", "Claims C1–C10",
          "The claims that the lab puts to the test: C1 to C9 from the paper, C10 on unseen distances at a fixed "
          "length (the Delays page). The Start page lists each with the "
          "page where it is seen, and docs/science.md says what in the app would contradict it."),
)


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().casefold())


_BY_NAME = {_key(name): item for item in ENTRIES for name in (item.anchor, item.title)}


def entry(name: str) -> Entry:
    """The entry whose anchor or title is `name` (any case; spaces or underscores for hyphens)."""
    try:
        return _BY_NAME[_key(name)]
    except KeyError:
        raise KeyError(f"no glossary entry {name!r}") from None


def term(name: str, text: str | None = None) -> str:
    """Markdown linking `text` (default: `name`) to the glossary entry `name` on the Theory page."""
    anchor = entry(name).anchor
    return f"[{text or name}]({GLOSSARY_PAGE}?{TERM_PARAM}={anchor}#{anchor})"


LEADS = {
    "start": (  # plain words only: a newcomer's first screen (the page's jargon comes below its first step)
        f"A small attention model learns to find the token 3 places back in sequences of 16 tokens, and this lab "
        f"tests whether that skill still works on sequences up to 256 times longer than its {term('training length')} "
        f"({term('extrapolation')}). Depending on how the model is told where each token sits, it keeps working far "
        f"past that length or drops to {term('chance')}, no better than a guess: the picture below shows both, and "
        f"the lessons show why, one question at a time."
    ),
    "train": (
        f"Pick a task ({term('retrieval task', 'retrieval')} or {term('shift task', 'shift')}), a way of encoding "
        f"positions and a model size, then train it on short sequences and watch its loss and accuracy live. "
        f"Every run then gets a {term('verdict')}: did it learn the task at its {term('training length')}, and is "
        f"it at {term('chance')} at twice that length, which every other page reads before it claims anything."
    ),
    "attention": (
        f"For one random sequence at each chosen length, these maps show how much weight every query position puts "
        f"on every earlier key, shrunk to fit the screen by {term('pooling')}. A head with a relative rule keeps its "
        f"{term('argmax key')} {term('offset', 'k')} places back at every length, while a "
        f"{term('pinned', 'pinned head')} stays on one key inside the training range once the query passes the "
        f"{term('training length')}."
    ),
    "carrier": (
        f"The {term('carrier')} is the head's positional preference, its average score for a key Δ places before "
        f"the query, and a clear peak at the {term('offset', 'offset k')} ({term('alignment')}) means it selects "
        f"that offset. With {term('RoPE')} every score depends on the distance alone ({term('equivariance')}), so "
        f"the same carrier applies at every length; the {term('Toeplitz fraction')}, {term('effective rank')} and "
        f"{term('near-recurrence', 'near-recurrences')} below describe its shape beside the "
        f"{term('untrained baseline', 'untrained model')}."
    ),
    "dilution": (
        f"As inputs grow, the softmax spreads attention over more keys and the share left on the right key, the "
        f"{term('target mass', 'target mass p')}, shrinks ({term('dilution')}), so accuracy fades with length. This "
        f"page measures both at lengths doubling from the {term('training length')}, sets the "
        f"{term('prediction', 'prediction from the weights')} beside them and fits the {term('dilution law')}, whose "
        f"{term('m_out')} says how far the target stands above far keys, and finds how far the run reaches, its "
        f"{term('horizon')}."
    ),
    "compare": (
        f"Overlay several runs, say {term('RoPE')} against {term('learned positions')} against "
        f"{term('linear attention')}, or several seeds of one recipe, on the same accuracy, {term('target mass')} and "
        f"{term('carrier')} charts. Each run keeps its colour, and the key numbers table lines up their "
        f"{term('verdict', 'verdicts')}, {term('m_out')} and {term('Toeplitz fraction')} side by side."
    ),
    "sweeps": (
        f"One run is an anecdote: a sweep trains a whole grid of runs, every encoding, "
        f"offset and seed you pick, and shows them together. Every learned {term('RoPE')} run, whatever its offset "
        f"or seed, falls on one curve once length is scaled by its {term('m_out')} (the data collapse of the "
        f"{term('dilution law')}), while {term('learned positions')} stay at {term('chance')}."
    ),
    "delays": (
        f"A run trains at one {term('training length')} on a set of delays, the gap between a source token and the "
        f"query that recalls it, and this page reads it at every delay the context holds, seen in training or not. "
        f"In the delay-copy presets a {term('RoPE')} head answers its trained delays and falls towards {term('chance')} "
        f"at most unseen ones, its {term('carrier')} peaking only where it trained, while selective-copy, whose "
        f"source carries a marker, is found at any delay."
    ),
    "transformer": (
        f"The same question for a full model: a transformer with several layers and heads, trained in the presets "
        f"on the {term('shift task')}. Each head gets its own {term('carrier')}, so you can see whether one head "
        f"learned the single head's rule ({term('carrier head')}) or got {term('pinned')}, and how accuracy holds "
        f"past the {term('training length')}."
    ),
    "lessons": (
        f"A lesson walks a class through the lab a step at a time, each step one chart from the other pages, such "
        f"as the {term('carrier')} or the {term('dilution law')}, with a question and its answer a click away. "
        f"Open it on a projector from its link in presenter mode, and give the students the locked link: they train "
        f"the same run on the shared pool and watch its {term('carrier')} form at the {term('offset', 'offset k')}."
    ),
    "theory": (
        f"This page works out why a {term('RoPE')} score depends only on the distance between query and key, why "
        f"that makes the {term('carrier')} a simple, low-rank rule and where the {term('dilution law')} comes from, "
        f"and checks {term('equivariance')} live on the selected run. Its Glossary tab "
        f"explains in plain words every term the pages use, and the links on every page open it at the word."
    ),
}


def lead(page: str) -> None:
    """The page's two-sentence plain lead, right under its title."""
    st.markdown(LEADS[page])


def glossary() -> None:
    """Every entry under a heading with its anchor, in the order above (the page draws the section's header)."""
    for item in ENTRIES:
        st.subheader(item.title, anchor=item.anchor)
        st.markdown(item.text)
    _scroll_to_linked_entry()


def linked_entry() -> str | None:
    """The anchor of the entry a link names in `?term=` (by anchor or title, as `entry` reads them), when it names
    one; the address keeps it."""
    name = st.query_params.get(TERM_PARAM)
    item = _BY_NAME.get(_key(name)) if name else None
    return item.anchor if item else None


def unknown_term(name: str) -> str:
    """What a link naming `name`, no entry of the glossary, is told: that it is unknown, the nearest entries' titles
    and where every entry is listed (plain text: the caller escapes it for markdown)."""
    shown = name if len(name) <= 40 else f"{name[:40]}…"
    near = dict.fromkeys(_BY_NAME[key].title for key in difflib.get_close_matches(_key(name), list(_BY_NAME), n=4))
    hint = f" Did you mean {' or '.join(list(near)[:3])}?" if near else ""
    return (f"This link names the glossary term “{shown}”, which the glossary does not have.{hint} "
            f"The Glossary tab below lists all {len(ENTRIES)} terms it explains.")


def _scroll_to_linked_entry() -> None:
    """Scroll once to the entry a link names in `?term=` (then drop it from the address)."""
    if TERM_PARAM not in st.query_params:
        return
    anchor = linked_entry()
    drop_from_link(TERM_PARAM)  # as the run ends (ui.address)
    if anchor is None:  # only a known anchor reaches the script
        return
    st.html(f"""<script>
      (function scroll(tries) {{
        const heading = document.getElementById("{anchor}");
        if (heading) heading.scrollIntoView();
        else if (tries > 0) setTimeout(() => scroll(tries - 1), 100);
      }})(50);
    </script>""", unsafe_allow_javascript=True)

"""What each pair of positional encoding and attention is expected to show, claim by claim
(docs/science.md §1): the one registry the captions, the pages and the lessons read, instead of
testing an encoding's name. C10's expectations, per delay task and encoding, are `DELAY_EXPECTATIONS`
(the Delays page's captions read them).

Each encoding has one record (issue 41): its name, how the app shows it and what it claims. Every label,
legend, line and caption reads it; adding an encoding is its class (lengen_core.models.encodings) and its
record in `ENCODING_RECORDS`.

    record = encoding_record("rope")
    record.display, record.colour, record.dash  # 'RoPE', '#1f77b4', 'solid': a label, its chart colour, its line

    expected = expectation("rope", "softmax")
    expected.accuracy       # past the training length: "extrapolates" (C1), "chance" (C1, C7) or None (no claim)
    expected.accuracy_claim # the claim the accuracy charts test: "C1", or "C7" for linear attention
    expected.trace          # where the queries past training attend: "relative" (C3, t − k) or "pinned" (C4)
    expected.carrier        # an aligned low-rank carrier (C5): RoPE with softmax
    expected.heads          # in a transformer (C8): a head "carries" the offset, or the table "pins"
    expected.relative       # the logit depends on t − u alone (C3's check), the encoding's own property

A pair with no claim (ALiBi, sinusoidal or no positions, with softmax) expects nothing: the captions
describe what its run does and say no claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from lengen_core.config import AttentionName, EncodingName
from lengen_core.models.encodings import ENCODING_CLASSES

CLAIMS = {  # the short form of docs/science.md §1's table
    "C1": "RoPE extrapolates to longer inputs, learned absolute positions do not",
    "C2": "a minimal fixed-offset retrieval task isolates positional selection",
    "C3": "with RoPE the logit depends on t − u alone, so the rule learned at L_train holds at every length",
    "C4": "a learned table leaves positions past training unconstrained: the head pins inside the training range",
    "C5": "the learned RoPE rule is a low-rank carrier kernel aligned with the target offset",
    "C6": "accuracy decays gracefully with length by an attention-dilution law",
    "C7": "linear attention (no normalisation) does not extrapolate",
    "C8": "all of this transfers to a multi-layer, multi-head transformer on the shift task",
    "C9": "shift_right(x, k) is a one-line length-independent RASP-L program; the carrier is how it is learned",
    "C10": "at a fixed length, a head that finds its source by position learns the trained delays only; found by a "
           "marker (content), it holds at every delay",
}

# A claim outside §1's table, named by the section of docs/science.md that states it: the position probe's
# (lengen_core.analysis.absolute), whose captions name it as they name C1–C10.
PROBE_CLAIM = "§12"
SECTION_CLAIMS = {
    PROBE_CLAIM: "training puts absolute position into a RoPE transformer's residual stream: after some block, a "
                 "linear probe reads the position better than on every untrained initialisation, by 0.1 R²",
}


def claim_words(code: str) -> str:
    """'C1 (RoPE extrapolates to longer inputs, learned absolute positions do not)': a claim named with its words
    (KeyError: no such claim)."""
    return f"{code} ({CLAIMS[code] if code in CLAIMS else SECTION_CLAIMS[code]})"


@dataclass(frozen=True)
class Expectation:
    encoding: str
    attention: str
    name: str  # how a caption names such a run: the record's run_name ('RoPE', 'learned-position'), 'linear-attention'
    accuracy: Literal["extrapolates", "chance"] | None  # past the training length (None: no claim)
    accuracy_claim: str  # the claim the accuracy charts test ("C1"; "C7" for linear attention)
    trace: Literal["relative", "pinned"] | None  # the argmax of the queries past training (C3 / C4)
    carrier: bool  # an aligned low-rank carrier is claimed (C5)
    heads: Literal["carries", "pins"] | None  # what a transformer's heads do (C8; pins: C4 too)
    relative: bool  # the logit depends on t − u alone (the encoding's class says)

    @property
    def heads_claim(self) -> str:
        return "C4, C8" if self.heads == "pins" else "C8"


# C10, measured per delay task and encoding (the comment above DELAY_EXPECTATIONS says how).
DelayOutcome = Literal["drops", "holds", "unlearned"]


@dataclass(frozen=True)
class EncodingRecord:
    """One positional encoding as the app names it, draws it and judges it. The claims are its own, with softmax
    attention (linear attention expects C7's failure whatever the positions); None or False: no claim."""
    name: str  # the config's value: 'rope'
    display: str  # its name in a label, a legend or a picker: 'RoPE', 'learned'
    run_name: str  # how a caption names a run of it: 'This learned-position run ...'
    colour: str  # its colour on every chart that colours by encoding
    dash: str  # its line style where colour shows something else (plotly's dash names)
    accuracy: Literal["extrapolates", "chance"] | None = None  # past the training length (C1)
    trace: Literal["relative", "pinned"] | None = None  # the argmax of the queries past training (C3 / C4)
    carrier: bool = False  # an aligned low-rank carrier (C5)
    heads: Literal["carries", "pins"] | None = None  # what a transformer's heads do (C8; pins: C4 too)
    delay_copy: DelayOutcome | None = None  # at the delays it never saw, on delay-copy (C10; None: not measured)


# In the order the legends list them. Colours and dashes as the charts drew them before the record (issue 41).
ENCODING_RECORDS: dict[str, EncodingRecord] = {record.name: record for record in (
    EncodingRecord("rope", "RoPE", "RoPE", "#1f77b4", "solid",
                   accuracy="extrapolates", trace="relative", carrier=True, heads="carries", delay_copy="drops"),
    EncodingRecord("learned", "learned", "learned-position", "#d62728", "dot",
                   accuracy="chance", trace="pinned", heads="pins", delay_copy="drops"),
    EncodingRecord("sinusoidal", "sinusoidal", "sinusoidal", "#9467bd", "dash", delay_copy="drops"),
    EncodingRecord("alibi", "ALiBi", "ALiBi", "#2ca02c", "dashdot", delay_copy="unlearned"),
    EncodingRecord("nope", "NoPE", "NoPE", "#7f7f7f", "longdash", delay_copy="unlearned"),
)}


def encoding_record(encoding: str) -> EncodingRecord:
    """The record of an encoding the config allows (KeyError: no such encoding)."""
    return ENCODING_RECORDS[encoding]


def _expectation(encoding: str, attention: str) -> Expectation:
    record = encoding_record(encoding)
    relative = ENCODING_CLASSES[encoding].relative
    if attention == "linear":  # C7: no normalisation, no extrapolation, whatever the positions; no relative trace
        return Expectation(encoding, attention, "linear-attention", "chance", "C7",
                           "pinned" if record.trace == "pinned" else None, False, record.heads, relative)
    return Expectation(encoding, attention, record.run_name, record.accuracy, "C1", record.trace, record.carrier,
                       record.heads, relative)


EXPECTATIONS = {(encoding, attention): _expectation(encoding, attention)
                for encoding in get_args(EncodingName) for attention in get_args(AttentionName)}


def expectation(encoding: str, attention: str) -> Expectation:
    """What a run of this encoding and attention is expected to show (KeyError: not a pair the config allows)."""
    return EXPECTATIONS[encoding, attention]


# Distance generalisation (issue 30 §1; docs/science.md, the delay tasks): what a minimal head does at the
# delays it never saw, at the length it trained at, per task and encoding, as measured (3 seeds each of
# L 32, V 16, d_model 64, delays 2-8, the recipe's learning rate; tests/unit/test_delay_claims.py holds the
# claims on other seeds). "drops": learns its training delays and falls towards chance at the unseen ones
# (the head found the source by a position kernel that peaks at the delays it trained on);
# "holds": learns and keeps its accuracy at unseen delays (the source found by its content, the marker);
# "unlearned": a single head cannot find the source at all, trained delays included (it sees no order: no
# positions, or ALiBi's one-head slope of 2^-8, a bias of 0.12 across 32 positions).
DELAY_CLAIM = "C10"
DELAY_HOLDS = 0.8  # mean accuracy over the unseen delays that counts as holding (measured: ≥ 0.97 or ≤ 0.2)
DELAY_EXPECTATIONS: dict[tuple[str, str], DelayOutcome] = {
    **{("delay-copy", name): record.delay_copy for name, record in ENCODING_RECORDS.items() if record.delay_copy},
    **{("selective-copy", encoding): "holds" for encoding in get_args(EncodingName)},
}
DELAY_OUTCOME_WORDS = {
    "drops": "learns its training delays and falls towards chance at the unseen ones",
    "holds": "keeps its accuracy at the delays it never saw",
    "unlearned": "does not learn the task at all, trained delays included: one head cannot tell the latest content "
                 "token from the others",
}


def delay_expectation(task: str, encoding: str, attention: str = "softmax", minimal: bool = True) -> DelayOutcome | None:
    """What a run of a delay task is expected to show at unseen delays (C10), or None where no claim is made
    (linear attention, a transformer: not measured)."""
    if attention != "softmax" or not minimal:
        return None
    return DELAY_EXPECTATIONS.get((task, encoding))


def delay_outcome(learned: bool, mean_unseen: float | None, chance: float) -> DelayOutcome | None:
    """What a run did (None with no unseen delay measured): unlearned below the bar at its own delays; holds when
    the unseen delays' mean accuracy is at the bar's level (≥ `DELAY_HOLDS`), drops otherwise."""
    if not learned:
        return "unlearned"
    if mean_unseen is None:
        return None
    return "holds" if mean_unseen >= DELAY_HOLDS else "drops"


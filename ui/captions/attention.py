"""Captions for where the queries attend (Attention, Transformer): the argmax trace against j* = t − k and
against pinning, and the zoom on the last query, each computed from the run's own numbers. No Streamlit.

The attention charts claim (docs/science.md §1): RoPE follows j* = t − k (C3), a learned table pins
inside the training range (C4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from lengen_core.analysis.heads import PIN_SHARE
from lengen_core.claims import expectation
from ui.captions.common import Caption, claims_note, did_not_learn, percent, share


@dataclass(frozen=True)
class ArgmaxTrace:
    """Where the queries of one sequence attend most, read against j* = t − k and against pinning."""

    length: int
    train_length: int
    offset: int
    relative_in_range: float  # share of the queries k ≤ t < L_train whose argmax key is t − k
    last_key: int  # argmax key of the last query
    beyond: int  # queries t ≥ L_train
    relative_beyond: float | None  # share of those whose argmax key is t − k
    common_key: int | None  # their most common argmax key
    common_share: float | None

    @property
    def pinned(self) -> bool:
        """Most queries past training on one key inside it (lengen_core.analysis.heads's rule)."""
        return self.common_key is not None and self.common_key < self.train_length and self.common_share >= PIN_SHARE


def argmax_trace(argmax_keys: np.ndarray, train_length: int, offset: int) -> ArgmaxTrace:
    keys = np.asarray(argmax_keys)
    t = np.arange(len(keys))
    relative = keys == t - offset
    inside, past = (t >= offset) & (t < train_length), t >= train_length
    common = share_of = None
    if past.any():
        values, counts = np.unique(keys[past], return_counts=True)
        common, share_of = int(values[np.argmax(counts)]), float(counts.max() / past.sum())
    return ArgmaxTrace(len(keys), train_length, offset, float(relative[inside].mean()), int(keys[-1]),
                       int(past.sum()), float(relative[past].mean()) if past.any() else None, common, share_of)


def trace_caption(trace: ArgmaxTrace, expected: Literal["relative", "pinned"] | None, learned: bool | None,
                  last_query_only: bool = True) -> Caption:
    """What the argmax keys of this run show past the training length, and whether that is the claim's (C3:
    relative; C4: pinned), as a Caption: the lead says, at this length, the share of the queries past training
    on t − k (and on one key, when pinned) and the verdict naming its claim; the rest, the queries inside
    training, the last query (`last_query_only`: the retrieval task scores it alone, the shift task every
    t ≥ k) and the claim's words."""
    L, k = trace.train_length, trace.offset
    inside = f"Inside it, {percent(trace.relative_in_range)} of the queries {k} ≤ t < {L} attend most to t − k"
    if last_query_only:
        target = trace.length - 1 - k
        where = "= t − k" if trace.last_key == target else f"(t − k = {target})"
        inside += f"; the last query, the only one the retrieval task scores, to key {trace.last_key} {where}"
    if trace.relative_beyond is None:  # no query past training: what the queries inside it do is the lead
        at = inside.replace("Inside it, ", f"At L = {trace.length:,}, the training length, ")
        return Caption(f"{at}.{did_not_learn(learned)}", "No query lies past training at this length.")
    past = (f"At L = {trace.length:,}, past the training length (t ≥ {L}), {percent(trace.relative_beyond)} of the "
            f"{trace.beyond:,} queries attend most to t − k")
    if trace.pinned:
        past += (f" and {percent(trace.common_share)} to key {trace.common_key}"
                 + (" = L_train − 1 − k" if trace.common_key == L - 1 - k else ""))
    else:
        past += f"; no one key takes more than {percent(trace.common_share)} of them"
    claim, codes = trace_verdict(trace, expected, learned)
    return Caption(f"{past}{claim}.{did_not_learn(learned)}", f"{inside}. {claims_note(codes)}")


def trace_verdict(trace: ArgmaxTrace, expected: Literal["relative", "pinned"] | None,
                  learned: bool | None) -> tuple[str, list[str]]:
    """The clause a trace caption ends its lead on, and the claims it names: whether the queries past training
    follow t − k (C3, where RoPE expects it) or pin (C4, where a learned table expects it). Relative: at least
    half of them on t − k; pinned: ArgmaxTrace.pinned (PIN_SHARE, the Transformer page's rule). A run that did
    not learn: no claim."""
    relative = trace.relative_beyond is not None and trace.relative_beyond >= 0.5
    if learned is False:
        return "", []
    if expected == "relative":
        return ((": the slope-1 line of a relative rule (C3)", ["C3"]) if relative else
                (": this RoPE run does NOT follow t − k past its training length, contrary to C3", ["C3"]))
    if expected == "pinned":
        return ((": pinned inside the training range (C4)", ["C4"]) if trace.pinned else
                (": this learned-position run is NOT pinned past its training length, contrary to C4", ["C4"]))
    return (": it follows t − k" if relative else f": pinned to key {trace.common_key}" if trace.pinned else
            ": neither a relative rule nor pinned"), []


def weights_trace(weights: np.ndarray, train_length: int, offset: int) -> ArgmaxTrace:
    """The ArgmaxTrace of an attention matrix (queries × keys): each query's argmax key."""
    return argmax_trace(np.asarray(weights).argmax(axis=1), train_length, offset)


def trace_expectation(encoding: str, attention: str) -> Literal["relative", "pinned"] | None:
    """What the attention charts claim (lengen_core.claims): RoPE with softmax follows t − k (C3), a learned
    table pins (C4)."""
    return expectation(encoding, attention).trace


def zoom_caption(last_key: int, target: int, weight_on_target: float | None, learned: bool | None) -> str:
    """The last query's argmax key against the circled target key t − k."""
    if last_key == target:
        text = f"the last query (bottom row) attends most to key {target} = t − k, the circled target"
    else:
        text = f"the last query (bottom row) attends most to key {last_key}, NOT to the circled target key {target}"
    if weight_on_target is not None:
        text += f"; weight {share(abs(weight_on_target))} on the target"
    return f"{text}; unpooled weights.{did_not_learn(learned)}"

"""Captions for where absolute position comes from: each sentence computed from this run's numbers
(lengen_core.analysis.absolute), saying where the run contradicts the claim."""

from __future__ import annotations

import numpy as np

from lengen_core.analysis.absolute import POSITION_SHIFT, AbsolutePosition, probe_finding
from lengen_core.claims import PROBE_CLAIM
from ui.captions.common import Caption, claims_note, split_lead

SINK_READING = 2.0  # a head reads the sink past training when its weight on key 0 is this × the uniform share


def sink_caption(found: AbsolutePosition, train_length: int) -> Caption:
    """Which heads put more weight on position 0 than a uniform head would (the lead), each head's mean weight
    on key 0 past training (the rest)."""
    sink, uniform = found.sink, found.uniform_sink
    beyond = slice(train_length, found.sink_length) if found.sink_length > train_length else slice(1, found.sink_length)
    reading, parts = [], []
    for layer in range(sink.shape[0]):
        for head in range(sink.shape[1]):
            mean, flat = float(sink[layer, head, beyond].mean()), float(uniform[beyond].mean())
            parts.append(f"L{layer}H{head} {mean:.3f}")
            if mean >= SINK_READING * flat:
                reading.append(f"L{layer}H{head}")
    where = (f"queries {beyond.start}–{beyond.stop - 1}" if beyond.start == train_length else "queries t ≥ 1")
    flat = float(uniform[beyond].mean())
    if reading:
        verdict = (f"{', '.join(reading)} read the sink: at least {SINK_READING:g}× the weight a uniform head would "
                   f"put on key 0 ({flat:.3f}).")
    else:
        verdict = (f"No head reads the sink: none puts {SINK_READING:g}× the uniform weight ({flat:.3f}) on key 0, so "
                   "in this run position 0 is not an anchor the later queries attend to.")
    return Caption(verdict, f"Mean weight on key 0 over {where}: {', '.join(parts)}.")


def _probe_word(probe) -> str:
    """'beats', 'falls short of' or 'does not beat': the probe against its untrained baseline (probe_finding's rule)."""
    if any(probe.beats):
        return "beats"
    return "falls short of" if max(probe.gaps) < -probe.margin else "does not beat"


def probe_caption(found: dict[int, AbsolutePosition]) -> Caption:
    """Each probe length's verdict against the claim (§12, lengen_core.claims) as the lead; each length's
    finding in numbers, and whether the lengths agree, as the rest."""
    words = {length: _probe_word(result.probe) for length, result in found.items()}
    said = "; ".join(f"at L = {length} it {word} its untrained baseline" for length, word in words.items())
    kinds = set(words.values())
    verdict = ("It bears out " if kinds == {"beats"} else "It contradicts " if kinds == {"falls short of"} else
               "It does not support " if "beats" not in kinds else "The lengths disagree, so quote the length with ")
    lines = [f"At L = {length}, {probe_finding(result.probe)}" for length, result in found.items()]
    return Caption(f"Position probe (R² of a ridge read of t on held-out sequences): {said}. {verdict}{PROBE_CLAIM}.",
                   " ".join(lines) + " " + claims_note([PROBE_CLAIM]))


def _moved(name: str, before: float, after: float, digits: int) -> str:
    """'raised R² 0.23 → 0.64', 'lowered accuracy 1.000 → 0.215', 'left accuracy at 1.000'."""
    if round(before, digits) == round(after, digits):
        return f"left {name} at {before:.{digits}f}"
    return f"{'raised' if after > before else 'lowered'} {name} {before:.{digits}f} → {after:.{digits}f}"


def intervention_caption(found: AbsolutePosition) -> Caption:
    """What replacing the first token and shifting every position changed, in accuracy and the probe's R² at its
    best layer (the lead); how much of the probe's gain position 0 carried, and the shift's meaning (the rest)."""
    trained, replaced, moved = found.variants
    best = found.probe.best_layer
    lead = (f"At L = {found.length}, replacing the first token's embedding by the mean embedding "
            f"{_moved('accuracy', trained.accuracy, replaced.accuracy, 3)} and "
            f"{_moved('R²', trained.r2[best], replaced.r2[best], 2)} at layer {best}, the probe's best against its "
            "baseline.")
    more = []
    gain = trained.r2[best] - found.probe.baseline_high[best]
    if gain > 0:
        removed = trained.r2[best] - replaced.r2[best]
        more.append(f"The probe had gained {gain:.2f} over the untrained seeds' highest; replacing position 0's "
                    f"content took away {max(removed, 0) / gain:.0%} of that gain.")
    else:
        more.append("The probe had gained nothing over the untrained seeds, so there is no gain for position 0 to "
                    "carry.")
    if moved.accuracy is None:
        lead += f" Shifting positions: {moved.reason.rstrip('.')}."
    else:
        change = max(abs(a - b) for a, b in zip(trained.r2, moved.r2, strict=True))
        exact = change < 1e-3 and abs(trained.accuracy - moved.accuracy) < 1e-3
        lead += (f" Shifting every position by {POSITION_SHIFT:,} {_moved('accuracy', trained.accuracy, moved.accuracy, 3)}"
                 f" and moved R² by at most {change:.1e}.")
        more.append("Nothing moved, as relative logits must: what position the model knows, it did not get from the "
                    "encoding." if exact else "The encoding hands the model absolute positions.")
    more.append(f"Accuracy over {found.scored} positions a sequence whose answer is not token 0.")
    return Caption(lead, " ".join(more))


def denominator_caption(measured: np.ndarray | None, exact: np.ndarray | None, train_length: int,
                        samples: int) -> Caption:
    """How ln Z_t rises with t, and how close layer 0's exact sums are to the measured ones: measured
    (layers, H, T), exact (H, T) for layer 0 or None."""
    if measured is None:
        return Caption("linear attention has no softmax denominator: nothing here depends on the mask's normalisation.")
    last = min(train_length, measured.shape[-1]) - 1
    rises = [float(measured[layer, head, last] - measured[layer, head, 0])
             for layer in range(measured.shape[0]) for head in range(measured.shape[1])]
    spread = f"{rises[0]:.1f} nats" if len(rises) == 1 else f"{min(rises):.1f} to {max(rises):.1f} nats across the heads"
    text = (f"from t = 0 to t = {last}, ln Z_t rises by {spread}: the causal mask lets a later query see more keys, "
            "so its softmax normalises over more")
    if exact is not None:
        gap = float(np.max(np.abs(exact - measured[0])))
        text += (f". Layer 0's logits are relative, so its rise is all the mask's: its exact sums from the weights "
                 f"(lines) sit within {gap:.2f} nats of the measured means ({samples} sequences)")
    if measured.shape[0] > 1:
        text += ". Past layer 0 a head's logits may carry position themselves, so its rise is the mask's and theirs"
    return split_lead(text + ".")

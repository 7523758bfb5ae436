"""Whether the prediction from the weights can be trusted for a run (lengen_core.analysis.trust), as the
Dilution and Compare pages say it: the prediction is drawn either way, this says how far to believe it."""

from __future__ import annotations

from collections.abc import Mapping

from lengen_core.analysis.trust import PredictionStatus


def status_caption(status: PredictionStatus | None) -> str | None:
    """'**Prediction: untrusted.** …' / '**Prediction: ok.** …'; None without a prediction (a transformer)."""
    if status is None:
        return None
    if status.trusted:
        return f"**Prediction from the weights: ok.** {status.reason}"
    return (f"**Prediction from the weights: untrusted.** {status.reason} The dashed curves are still drawn; read "
            "them as the model's estimate, not as a check of the measurement.")


def status_cell(status: PredictionStatus | None) -> str:
    """The Compare table's cell: 'ok', 'untrusted', or 'n/a (transformer)'."""
    return "n/a (transformer)" if status is None else status.status


def untrusted_text(statuses: Mapping[str, PredictionStatus | None]) -> str | None:
    """'**label**: reason …' for each run (by label) whose prediction is untrusted; None when none is."""
    parts = [f"**{label}**: {status.reason}" for label, status in statuses.items()
             if status is not None and not status.trusted]
    return " ".join(parts) or None

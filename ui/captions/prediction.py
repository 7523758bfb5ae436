"""Whether the prediction from the weights can be trusted for a run (lengen_core.analysis.trust), as the
Dilution and Compare pages say it: the prediction is drawn either way, this says how far to believe it."""

from __future__ import annotations

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

"""Whether the prediction from the weights (lengen_core.analysis.dilution) can be trusted for a run, and why
a run has no predicted horizon: one verdict each, which the command line, the sweep and the app format.

The prediction is never fitted to the measurement, so the measurement can check it. It is **untrusted**
when either of these holds (docs/prediction.md, "Where it is not trusted"):

- **it disagrees with the measurement** at a measured length (the training length included, from the
  run's own verdict when it was not asked for): predicted accuracy outside the measured 95% interval
  widened by PREDICTION_BOUND, or predicted target mass more than PREDICTION_BOUND + 2 standard
  errors from the measured mean. PREDICTION_BOUND is the bound the prediction panel holds every
  trained run to (tests/unit/test_prediction_panel.py); a miss beyond it is one the panel would fail.
- **its own expansion is not small**: the second-order term of E[p] (`Prediction.mass_correction`)
  is more than MAX_MASS_CORRECTION of the predicted p at some length. The expansion is exact to
  second order in the spread of the light keys; where that term is large the higher orders are not
  negligible either, whatever the measurement says at the lengths measured.
- **keys it cannot tell apart**: more than DOMINANT_KEYS random keys of one query token lie over
  LOGIT_HEADROOM (40 nats) above its target (`Prediction.clamped_keys`). Their weights are clamped
  to e^40, so the prediction no longer knows which of them wins, and beyond the DOMINANT_KEYS drawn
  one by one they enter as a Gaussian. A head trained far on from the construction (|W_Q| in the
  hundreds) has such keys by the dozen; on three of them the prediction still came within 0.05.

A prediction that passes both is **ok**. Neither check hides the prediction: it is shown either way, with
the status and its reason beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lengen_core.analysis.dilution import DOMINANT_KEYS, LOGIT_HEADROOM, Prediction
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.verdict import Verdict
from lengen_core.thresholds import ACCURACY_BAR, PREDICTION_BOUND  # the prediction agrees within PREDICTION_BOUND

MAX_MASS_CORRECTION = 0.1  # the second-order term's largest share of the predicted p


@dataclass(frozen=True)
class PredictionStatus:
    status: str  # "ok" or "untrusted"
    reason: str  # one or two sentences a person reads, from this run's numbers

    @property
    def trusted(self) -> bool:
        return self.status == "ok"


def _accuracy_miss(predicted: float, low: float, high: float) -> float:
    """How far the predicted accuracy lies outside [low, high] (0 inside)."""
    return max(low - predicted, predicted - high, 0.0)


def mass_miss(predicted: float, measured: float, sem: float) -> float:
    """How far a predicted target mass lies beyond two standard errors `sem` of the measured mean (negative:
    inside them). The prediction agrees on p where this is at most PREDICTION_BOUND; the Compare page's
    target-mass caption judges by it too."""
    return abs(predicted - measured) - 2 * sem


def prediction_status(predictions: Mapping[int, Prediction], reports: Sequence[LengthReport],
                      train_length: int, verdict: Verdict | None) -> PredictionStatus:
    """The status of `predictions` (length -> prediction, the training length among them where made)
    against `reports` (the lengths measured) and the run's verdict (its training-length accuracy)."""
    misses: list[tuple[float, str]] = []  # (how far beyond its bound, sentence)
    measured = {r.length: r for r in reports}
    if train_length not in measured and verdict is not None and train_length in predictions:
        p = predictions[train_length]
        miss = _accuracy_miss(p.accuracy, verdict.in_range_low, verdict.in_range_high)
        if miss > PREDICTION_BOUND:
            misses.append((miss - PREDICTION_BOUND,
                           (f"at the training length {train_length:,} it predicts accuracy {p.accuracy:.3f}, "
                           f"the run measured {verdict.in_range_accuracy:.3f} (95% {verdict.in_range_low:.3f} to "
                           f"{verdict.in_range_high:.3f})")))
    for length, report in sorted(measured.items()):
        p = predictions.get(length)
        if p is None:
            continue
        miss = _accuracy_miss(p.accuracy, report.accuracy_low, report.accuracy_high)
        if miss > PREDICTION_BOUND:
            misses.append((miss - PREDICTION_BOUND,
                           (f"at {length:,} it predicts accuracy {p.accuracy:.3f}, measured {report.accuracy:.3f} "
                           f"(95% {report.accuracy_low:.3f} to {report.accuracy_high:.3f})")))
        beyond = mass_miss(p.target_mass, report.target_mass, report.target_mass_sem)
        if beyond > PREDICTION_BOUND:
            misses.append((beyond - PREDICTION_BOUND,
                           (f"at {length:,} it predicts p {p.target_mass:.3f}, measured {report.target_mass:.3f} "
                           f"(± {report.target_mass_sem:.3f})")))
    corrections = [(p.mass_correction, n) for n, p in predictions.items() if p.mass_correction > MAX_MASS_CORRECTION]
    if misses:
        worst = max(misses)[1]
        more = f" ({len(misses) - 1} more such {'miss' if len(misses) == 2 else 'misses'})" if len(misses) > 1 else ""
        return PredictionStatus("untrusted", f"The prediction from the weights is not trusted for this run: {worst}, "
                                             f"more than {PREDICTION_BOUND:g} beyond what was measured{more}.")
    clamped = [(p.clamped_keys, n) for n, p in predictions.items() if p.clamped_keys > DOMINANT_KEYS]
    if clamped:
        count, length = max(clamped)
        return PredictionStatus("untrusted", f"The prediction from the weights is not trusted for this run: at "
                                             f"{length:,}, {count:,} random keys lie more than {LOGIT_HEADROOM:g} nats "
                                             "above the target for some query token. Their weights are clamped, so it "
                                             f"cannot tell which of them wins, and only {DOMINANT_KEYS} are drawn one by "
                                             "one (docs/prediction.md).")
    if corrections:
        share, length = max(corrections)
        return PredictionStatus("untrusted", f"The prediction from the weights is not trusted for this run: at "
                                             f"{length:,} the second-order term of its target mass is {share:.0%} of "
                                             f"it (more than {MAX_MASS_CORRECTION:.0%}), so the expansion it rests "
                                             "on is not small there.")
    lengths = sorted(n for n in predictions if n in measured or n == train_length)
    checked = ", ".join(f"{n:,}" for n in lengths) if lengths else "no measured length"
    return PredictionStatus("ok", f"The prediction from the weights agrees with the measurement within "
                                  f"{PREDICTION_BOUND:g} (beyond the measured interval) at {checked}.")


def horizon_reason(predicted: Horizon | None, note: str | None, single_head: bool,
                   status: PredictionStatus | None, verdict: Verdict | None) -> str | None:
    """Why a run has no predicted horizon (None: it has one)."""
    if predicted is not None and predicted.length is not None:
        return None
    if not single_head:
        return "no closed-form prediction for this model (only the minimal single head on retrieval has one)"
    if predicted is None:
        return note or "not computed"
    reason = f"the predicted accuracy is below {ACCURACY_BAR:g} already at the training length"
    if verdict is not None and verdict.learned:
        reason += f", although the run learned ({verdict.in_range_accuracy:.3f} measured there)"
        if status is not None and not status.trusted:
            reason += ": the prediction is not trusted for this run"
    return reason

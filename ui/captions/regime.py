"""Is this run in the dilution regime? One answer per run, which every caption of a page reads. No Streamlit.

Two captions on the Dilution page speak of dilution: the accuracy chart's (which limits past training, the
readout or the attention?) and the 1/p chart's (is its far slope the law's 1?). Each once ran its own
test, and a learned-position run read "the attention limits (dilution)" under one chart and "no dilution
regime" under the next. Both now read `dilution_regime`, computed once from the law fitted to the run
(lengen_core.analysis.fit, with its own thresholds: p > 2/V, within LAW_TOLERANCE): the run is in the
dilution regime only where the law was fitted and describes it. A slope near 1 alone is not enough: a run
at chance also has p falling like 1/L, its attention spread over keys it never learned to tell apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from lengen_core.analysis.fit import FitResult

# Why a run is not in the dilution regime, by the fit's status (lengen_core.analysis.fit.FitStatus).
_NOT_DILUTION = {
    "at_chance": "this run is at chance past its training length",
    "not_learned": "this run did not learn the task",
    "no_dilution": "p does not fall with length over the lengths fitted",
    "not_monotone": "p rises and falls with length, which the law cannot describe",
    "too_few_points": "too few lengths past the training length have p above 2/V to fit the law",
}


@dataclass(frozen=True)
class DilutionRegime:
    """`diluted`: True where the dilution law was fitted and describes the run, False where it was not or
    misses it (`why` says which), None where no law was asked of this run (a transformer; no prediction)."""

    diluted: bool | None
    why: str  # a clause: why it is not the dilution regime ('' when it is, or when it is not known)

    @property
    def words(self) -> str:
        """How a caption says it: 'the dilution regime, where the fitted law describes this run', 'no dilution
        regime: this run is at chance past its training length', or '' when it is not known."""
        if self.diluted:
            return "the dilution regime, where the fitted law describes this run"
        return f"no dilution regime: {self.why}" if self.diluted is False else ""


def dilution_regime(fit: FitResult | None) -> DilutionRegime:
    """The run's dilution verdict from the law fitted to it (None: not known here)."""
    if fit is None or fit.status in ("not_applicable", "not_asked"):
        return DilutionRegime(None, "")
    if fit.fit is not None:
        if fit.fit.holds:
            return DilutionRegime(True, "")
        return DilutionRegime(False, f"the fitted law misses this run by {fit.fit.max_relative_error:.0%}")
    return DilutionRegime(False, _NOT_DILUTION.get(fit.status, "no law was fitted to this run"))

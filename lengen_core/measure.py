"""One measurement of a run: evaluate → predict → fit → horizon, the one way every caller reads a run.

    m = measure(run, [16, 64, 256, 1024], samples=256)             # as trained
    m = measure(run, [16, 64, 256], samples=256, rule=make_rule("ntk", 4))
    m.reports, m.predictions, m.fit, m.measured_horizon, m.predicted_horizon

The command line's `evaluate`, a sweep's cells and the app's Dilution and Compare pages each chained
these steps themselves, and the copies disagreed (issue 25): one run showed m_out 8.70 on one page and
8.31 on another, a horizon of 1,536 in one place and "≥ 3,072" in the next. They now format this
function's result and compute nothing of their own, so for one run and one request (lengths, samples,
seed, rule) every reader shows the same numbers. One policy for each point on which they differed:

- **The prediction is made at L_train and at every length asked, in one call**, whatever the lengths.
  The fit counts far keys by the weight the prediction gives them, K(n) ∝ 1/p̂(n) − 1/p̂(L_train), so it
  needs p̂ at L_train; asking for it always costs one length more and, where no length reaches L_train,
  changes nothing (the law needs three lengths at or past it). One call, not one per length, because a
  relative encoding's prediction is one sweep over the keys serving every length.
- **Every single-head run gets its prediction and predicted horizon, learned or not.** They describe
  the weights, not a claim that a rule was learned: for a run that did not learn they say how far from
  it the weights are (accuracy near chance, no horizon). Only the dilution law is gated by the verdict
  (lengen_core.analysis.fit: no law for a run that did not learn or is at chance past L_train).
- **The predicted horizon is looked for up to the run's whole range as trained** (2^20 tokens or the end
  of a learned table, `horizon_ceiling`): one sweep over the keys prices every length, and each later
  step of the search is priced before it starts, so a server over budget gets the bracket found so far,
  said in `horizon_note`. Under an inference rule every length costs a sweep of its own, so the search
  stops at the longest length measured and the note says so. Either way `horizon_ceiling` says how far
  it looked.
- **What was measured earlier is taken back only where it answers exactly the question asked** (`Shipped`):
  the evaluations at these samples, seed and lengths as trained, the prediction at these lengths, the
  horizon searched to the same ceiling, and the law where it was fitted to these samples at the same
  lengths ≥ L_train (it reads no others; its bootstrap has a fixed seed), so reading them changes no number.
- Transformers and the shift task (not `config.single_head`) are read by forward passes, one length at
  a time under the rule (lengen_core.analysis.sequence): no closed-form prediction, no law, no horizon.

With `prices` (a server's budgets: the command line, a sweep and the app pass lengen.budget,
which the science never imports) every cost is checked before the work it prices starts; a horizon
search over budget is left out with a note, not refused, since the rest of the answer stands without it. `Shipped` hands in what was measured of the run earlier by these same calls (lengen.first_visit:
a preset's shipped numbers, or those a run trained in the app was saved with), so a first visit to the
app computes none of it again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lengen_core.analysis.argmax_count import UnstableReadout
from lengen_core.analysis.dilution import Prediction
from lengen_core.analysis.dilution import predict as predict_at
from lengen_core.analysis.evaluate import LengthReport, Progress, check_lengths, check_sampling, check_sweep, evaluate
from lengen_core.analysis.fit import NOT_APPLICABLE, NOT_ASKED, FitResult, fit_dilution
from lengen_core.analysis.horizon import Horizon, horizon_ceiling, measured_horizon, predicted_horizon
from lengen_core.analysis.rules import InferenceRule, NoRule, under_rule
from lengen_core.analysis.sequence import MAX_SEQUENCE_LENGTH, SequenceReport, evaluate_sequence
from lengen_core.analysis.trust import PredictionStatus, horizon_reason, prediction_status
from lengen_core.analysis.verdict import Verdict
from lengen_core.config import ConfigError, RunConfig
from lengen_core.models.encodings import LengthError
from lengen_core.training import Run

EVALUATION_SEED = 12_345  # the default seed of the evaluation sequences (the pages' and the command line's)
NOT_SEARCHED = "not searched: not asked for, and not stored with the run"


class Prices(Protocol):
    """A server's budgets, as lengen.budget (the module itself) gives them: each check raises a
    ConfigError naming the limit and what to change when the work is over it."""

    def check_single_head_evaluation(self, config: RunConfig, lengths: Sequence[int], samples: int) -> object: ...

    def check_sequence_evaluation(self, config: RunConfig, lengths: Sequence[int], samples: int) -> object: ...

    def check_prediction(self, config: RunConfig, lengths: Sequence[int], rule=None) -> object: ...

    def check_horizon(self, config: RunConfig, ceiling: int, rule=None) -> object: ...

    def prediction_fits(self, config: RunConfig, budgets=None, rule=None) -> Callable[[list[int]], bool]: ...


@dataclass(frozen=True)
class Shipped:
    """Numbers these same calls computed earlier for one run, as trained at EVALUATION_SEED (a preset
    ships them, a run trained in the app is saved with them: lengen.first_visit). `measure` takes a piece instead of computing it only where it
    answers exactly the question asked."""

    evaluations: Mapping[int, Mapping[int, LengthReport]] = field(default_factory=dict)  # samples -> length -> report
    predictions: Mapping[int, Prediction] = field(default_factory=dict)  # length -> prediction
    horizon: Horizon | None = None  # the predicted horizon, searched up to `horizon_ceiling`
    fit: FitResult | None = None  # the law fitted to `fit_samples` samples at `fit_lengths`, from these numbers
    fit_samples: int | None = None
    fit_lengths: tuple[int, ...] = ()  # the lengths ≥ L_train it was fitted from (the law reads no others), sorted


@dataclass(frozen=True)
class Measurement:
    """One run measured at `lengths` (in the order asked): what every reader of a run formats."""

    run_id: str
    rule: str  # the inference rule's label ("none", "ntk:4")
    lengths: tuple[int, ...]
    samples: int
    seed: int
    train_length: int
    verdict: Verdict | None
    reports: tuple[LengthReport, ...] | tuple[SequenceReport, ...]  # one per length
    predictions: tuple[Prediction, ...]  # one per length; () without a closed form (not single head)
    train_prediction: Prediction | None  # at L_train, where the fit's key count starts
    fit: FitResult
    measured_horizon: Horizon | None  # on the measured lengths ≥ L_train; None: none measured (or no closed form)
    predicted_horizon: Horizon | None  # from the weights; None: no closed form, or over budget (`horizon_note`)
    horizon_ceiling: int | None  # how far the predicted horizon was to be looked for
    horizon_note: str | None  # why there is none, or what limits it
    # whether the prediction can be trusted here, and why (lengen_core.analysis.trust); None without one
    prediction_status: PredictionStatus | None = None
    single_head: bool | None = None  # the minimal head on retrieval (None: as `closed_form` says)

    @property
    def horizon_reason(self) -> str | None:
        """Why there is no predicted horizon (None: there is one)."""
        single_head = self.closed_form if self.single_head is None else self.single_head
        return horizon_reason(self.predicted_horizon, self.horizon_note, single_head, self.prediction_status,
                              self.verdict)

    @property
    def closed_form(self) -> bool:
        """The minimal head on retrieval: predicted from the weights, fitted by the law."""
        return bool(self.predictions)

    @property
    def fitted_masses(self) -> list[float | None]:
        """The fitted p at each length where the law was fitted (L_train … its longest length), else None."""
        fit = self.fit.fit
        return [None] * len(self.lengths) if fit is None else fit.drawn_at(self.lengths)


def search_ceiling(run: Run, lengths: Sequence[int], rule: InferenceRule) -> int:
    """How far the predicted horizon is looked for (the module docstring says why)."""
    whole = horizon_ceiling(run.model)
    return whole if rule.trivial else min(max(lengths), whole)


def check_measurement(run: Run, lengths: Sequence[int], samples: int, rule: InferenceRule | None = None,
                      seed: int = EVALUATION_SEED, shipped: Shipped | None = None,
                      prices: Prices | None = None, predict: bool = True) -> None:
    """Every refusal of `measure` before any of its work: bad lengths or samples (LengthError), a rule
    undefined for the run (RuleError) and, with `prices`, what is over its budgets. Work that `shipped`
    answers, or that is not asked for (`predict`), costs nothing and is not priced."""
    rule = rule or NoRule()
    config = run.config
    check_sampling(samples, seed)
    check_lengths(config, run.model, lengths)
    check_sweep(lengths, samples)
    rule.check(config)
    if not config.single_head:
        too_long = [n for n in lengths if n > MAX_SEQUENCE_LENGTH]
        if too_long:
            raise LengthError(f"length {too_long[0]} is beyond {MAX_SEQUENCE_LENGTH}, the limit for full-sequence "
                              "evaluation")
        if prices is not None:
            prices.check_sequence_evaluation(config, lengths, samples)
        return
    if prices is not None and _shipped_reports(shipped, lengths, samples, seed, rule) is None:
        prices.check_single_head_evaluation(config, lengths, samples)
    at = _predicted_lengths(run, lengths)
    if prices is not None and predict and _shipped_predictions(shipped, at, rule) is None:
        prices.check_prediction(config, at, rule)


def measure(run: Run, lengths: Sequence[int], samples: int = 256, rule: InferenceRule | None = None,
            seed: int = EVALUATION_SEED, shipped: Shipped | None = None, prices: Prices | None = None,
            predict: bool = True, search: bool = True, progress: Progress | None = None) -> Measurement:
    """The run measured at `lengths` with `samples` sequences each (drawn from `seed`), read under `rule`
    (None: as trained), on the device its model is on. Checked first (`check_measurement`), against
    `prices` where given. `predict`: make the prediction from the weights where `shipped` does not hold
    it; `search`: look for the predicted horizon where `shipped` does not hold it. Without them only what
    `shipped` holds answers (none: no predictions, no fit through them, the horizon's note says so).
    `progress` hears the evaluation's (keys done, keys in all)."""
    rule = rule or NoRule()
    lengths = tuple(lengths)
    check_measurement(run, lengths, samples, rule, seed, shipped, prices, predict)
    config, model = run.config, run.model
    L = config.task.train_length
    common = dict(run_id=run.run_id, rule=rule.label, lengths=lengths, samples=samples, seed=seed, train_length=L,
                  verdict=run.verdict)
    if not config.single_head:  # one length at a time: each under the rule as read at that length
        reports = tuple(evaluate_sequence(under_rule(model, rule, n), config, [n], samples=samples, seed=seed)[0]
                        for n in lengths)
        return Measurement(**common, reports=reports, predictions=(), train_prediction=None, fit=NOT_APPLICABLE,
                           measured_horizon=None, predicted_horizon=None, horizon_ceiling=None, horizon_note=None,
                           single_head=False)
    known_reports = _shipped_reports(shipped, lengths, samples, seed, rule)
    reports = known_reports or tuple(evaluate(model, config, lengths, samples=samples, seed=seed, rule=rule,
                                              progress=progress))
    at = _predicted_lengths(run, lengths)
    known_predictions = _shipped_predictions(shipped, at, rule)
    unstable = None  # why the weights give no prediction, where they give none
    try:
        found = known_predictions or ({p.length: p for p in predict_at(model, config, at, rule=rule)} if predict else {})
    except UnstableReadout as error:
        found, unstable = {}, PredictionStatus("untrusted", f"No prediction from the weights for this run: {error}.")
    fit = None
    if known_reports is not None and known_predictions is not None:  # the very numbers it was fitted to
        fit = _shipped_fit(shipped, lengths, samples, L)
    if fit is None and unstable is not None:  # asked, but the weights gave none: say so, not "not asked"
        fit = FitResult(NOT_ASKED.status, None, "No law here: it counts the far keys by the prediction's weights, "
                                                "and these weights give no prediction (see the prediction's status).")
    if fit is None and not found:
        fit = NOT_ASKED  # the law reads the prediction's weights: another law without them would be another answer
    if fit is None:
        fit = fit_dilution(lengths, [r.target_mass for r in reports], [r.target_mass_sem for r in reports], L,
                           config.task.vocab_size, run.verdict, {n: p.target_mass for n, p in found.items()})
    ceiling = search_ceiling(run, lengths, rule)
    if unstable is not None:
        horizon, note = None, "no prediction from the weights (see the prediction's status)"
    elif search or shipped_horizon(shipped, rule, ceiling) is not None:
        horizon, note = search_predicted_horizon(run, rule, ceiling, shipped, prices,
                                                 known={n: p.accuracy for n, p in found.items()})
    else:
        horizon, note = None, NOT_SEARCHED
    return Measurement(**common, reports=reports, predictions=tuple(found[n] for n in lengths) if found else (),
                       train_prediction=found.get(L), fit=fit,
                       measured_horizon=measured_horizon(lengths, [r.accuracy for r in reports], L),
                       predicted_horizon=horizon, horizon_ceiling=ceiling, horizon_note=note,
                       prediction_status=prediction_status(found, reports, L, run.verdict) if found else unstable,
                       single_head=True)


def _predicted_lengths(run: Run, lengths: Sequence[int]) -> list[int]:
    """Where the prediction is made: L_train and every length asked, sorted, once each."""
    return sorted({run.config.task.train_length, *lengths})


def search_predicted_horizon(run: Run, rule: InferenceRule, ceiling: int, shipped: Shipped | None,
                             prices: Prices | None, known: Mapping[int, float] | None = None
                             ) -> tuple[Horizon | None, str | None]:
    """The predicted horizon and its note: `shipped`'s where it holds this search, else the search up to
    `ceiling`, priced first (over budget: none, and why), each later step priced too. `measure` calls it
    with `search`; a caller that shows the search's progress apart measures with `search=False`, then
    calls it and puts the answer in (`dataclasses.replace`). `known`: the measurement's own predicted
    accuracies at its lengths, which a search under a rule reads instead of predicting them again
    (lengen_core.analysis.horizon.predicted_horizon: the same horizon)."""
    if shipped_horizon(shipped, rule, ceiling) is not None:
        return shipped.horizon, None
    config = run.config
    afford = None
    if prices is not None:
        try:
            prices.check_horizon(config, ceiling, rule)
        except ConfigError as error:
            return None, f"not computed here: {' '.join(str(error).split())}"
        afford = prices.prediction_fits(config, rule=rule)
    try:
        reach = predicted_horizon(run.model, config, ceiling=ceiling, afford=afford, rule=rule, known=known)
    except UnstableReadout as error:
        return None, f"no prediction from the weights: {error}"
    if not reach.resolved:
        return reach, f"bracket only: {reach.text}"
    if not rule.trivial:
        return reach, f"under {rule.label}, looked for up to the longest length evaluated, {ceiling:,}"
    return reach, None


def shipped_horizon(shipped: Shipped | None, rule: InferenceRule, ceiling: int) -> Horizon | None:
    """The horizon `shipped` holds where it answers this search (as trained, up to the same ceiling), else None."""
    if rule.trivial and shipped is not None and shipped.horizon is not None and shipped.horizon.ceiling == ceiling:
        return shipped.horizon
    return None


def _shipped_reports(shipped: Shipped | None, lengths: Sequence[int], samples: int, seed: int,
                     rule: InferenceRule) -> tuple[LengthReport, ...] | None:
    if shipped is None or not rule.trivial or seed != EVALUATION_SEED:
        return None
    by_length = shipped.evaluations.get(samples, {})
    return tuple(by_length[n] for n in lengths) if all(n in by_length for n in lengths) else None


def _shipped_fit(shipped: Shipped, lengths: Sequence[int], samples: int, train_length: int) -> FitResult | None:
    """The shipped law where it was fitted to exactly the points asked: the law reads the lengths ≥ L_train
    only, and the reports and predictions there are the shipped ones, so the fit would be the same."""
    if shipped.fit is None or samples != shipped.fit_samples:
        return None
    return shipped.fit if tuple(sorted(n for n in lengths if n >= train_length)) == shipped.fit_lengths else None


def _shipped_predictions(shipped: Shipped | None, lengths: Sequence[int],
                         rule: InferenceRule) -> dict[int, Prediction] | None:
    if shipped is None or not rule.trivial or not all(n in shipped.predictions for n in lengths):
        return None
    return {n: shipped.predictions[n] for n in lengths}

"""What the pages show first for a run, computed once where its training ends and stored with it.

    save_run(store, run, saved=lambda run_id: ...)   # saved, `saved` told (the run opens now), then measured:
                                                     # first_visit_data(run) added to the store (add_first_visit)
    shipped = from_dict(store.first_visit(run_id))   # the app's Dilution and Compare read it (ui.runs.shipped)
    carrier = carrier_from_dict(store.first_visit(run_id)["carrier"], search)   # Carrier and Compare

**The default request** is one, for every page that shows a run's dilution numbers on a first visit:
FIRST_VISIT_SAMPLES sequences per length at `request_lengths` (k + 1, then the training length doubled
up to FIRST_VISIT_LONGEST, those the run's encoding allows). The Dilution page asks exactly this; the
Compare page asks the doublings of the same ladder with the same samples, so its evaluations, its
prediction, its fitted law (fitted at n ≥ L_train only) and its horizons are the Dilution page's,
number for number. A page asked for other lengths or samples measures them itself and its caption
says what it measured.

**The precomputation** (`first_visit`) is `lengen_core.measure.measure` at that request, as trained:
the evaluations at every length, the prediction at L_train and every length, the predicted horizon
searched up to the run's whole range, and the law fitted to them. Whatever trains a run stores it through
`save_run`: the app's training process (lengen.training_process), the command line's `train`
and `continue`, a sweep's cells. The run is saved and reported done first, then measured in the same
process, and the store adds the numbers beside the weights when they are ready (renamed into place whole,
counted in the quota; `RunStore.first_visit_pending` says they are coming meanwhile). Measured so, a default
RoPE run took 2.7-3.7 s of one idle core here, 22-69 s in a training process on the shared machine: a
requester that waited for them waited that long before the run opened (issue 40). The preset builder
(scripts.build_presets) calls `first_visit_data` for the presets. `measure` takes these numbers back through `Shipped` only where they answer
exactly the question asked, so reading them never changes a number: it only skips the work. The
carrier the Carrier page and Compare show first (extracted with the default near-recurrence search,
FIRST_VISIT_CARRIER_SEARCH) is stored beside them (`first_visit_data`). A run
stored without them (trained before this, or not single-head) is measured on its first visit, as before.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from lengen import budget
from lengen.store import RunStore
from lengen_core.analysis.carrier import BaselineRange, Carrier, CarrierMetrics, NearRecurrence, extract_carrier
from lengen_core.analysis.dilution import Prediction
from lengen_core.analysis.evaluate import LengthError, LengthReport, check_lengths, doublings
from lengen_core.analysis.fit import DilutionFit, FitResult
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.sequence import MAX_SEQUENCE_LENGTH
from lengen_core.config import MAX_EVAL_LENGTH, RunConfig, with_changes
from lengen_core.measure import EVALUATION_SEED, Shipped, measure
from lengen_core.training import Run

FIRST_VISIT_LONGEST = 1 << 16  # the default request's longest length (Dilution's and Compare's default view)
FIRST_VISIT_SAMPLES = 256  # its sequences per length
FIRST_VISIT_CARRIER_SEARCH = 1 << 16  # the Carrier page's (and Compare's) near-recurrence search by default
FORMAT = 1  # of the stored dictionary (`to_dict`); another number is not read (measured again instead)
MEASURE_ENV = "LENGEN_MEASURE_ON_SAVE"  # "0": save trained runs without their numbers (the test suite's trainings)
LOG = logging.getLogger(__name__)


def measure_on_save() -> bool:
    """Whether a training measures its run for the first visit as it saves it: yes unless $LENGEN_MEASURE_ON_SAVE
    is "0" (tests that train many throwaway runs and read none of their pages set it; measuring a
    default run takes about 45 s of two cores, most of it the predicted horizon's search up to 2^20)."""
    return os.environ.get(MEASURE_ENV, "1").strip() != "0"


def save_run(store: RunStore, run: Run, saved: Callable[[str], None] = lambda _: None, replace: bool = False) -> str:
    """Store a trained run with its first-visit numbers; its id. A run stopped before its steps gets them in its
    config (and id). It is saved first (marked pending where it will be measured), `saved(run_id)` is told at
    once (the requester may open it: the pages read what is stored), then it is measured at the pages' default
    request and the numbers are added (`RunStore.add_first_visit`). A run stored already is left as it is
    (`replace`: written over, a retraining); a run without a closed form, or with measuring off, is saved
    without numbers; a measurement that fails leaves them out (the pages then measure it) and is logged."""
    if run.steps < run.config.train.steps and not run.stopped_early:
        run = dataclasses.replace(run, config=with_changes(run.config, steps=max(1, run.steps)))
    if store.exists(run.run_id) and not replace:
        saved(run.run_id)
        return run.run_id
    token = uuid.uuid4().hex if measured_on_save(run.config) else None
    (store.replace if replace else store.save)(run, pending=token)
    saved(run.run_id)
    if token is not None:
        numbers = None
        try:
            with torch.no_grad():
                numbers = first_visit_data(run)
        except Exception:
            LOG.exception("measuring %s for its first visit failed; it stays stored without its numbers", run.run_id)
        store.add_first_visit(run.run_id, token, numbers)
    return run.run_id


def measured_on_save(config: RunConfig) -> bool:
    """Whether `save_run` measures a new run of `config` for its first visit: one with a closed form (single head),
    while measuring is on (`measure_on_save`)."""
    return config.single_head and measure_on_save()


def first_visit_seconds(config: RunConfig) -> float:
    """The estimated seconds `save_run` spends measuring a new run of `config` (lengen.budget's
    estimates of the default request's evaluation, prediction, horizon search and carrier; the ladder's every
    length, so a learned table's is over-estimated); 0 where it measures none. A sweep counts it per cell."""
    if not measured_on_save(config):
        return 0.0
    lengths, L = ladder(config), config.task.train_length
    costs = (budget.single_head_evaluation_cost(config, lengths, FIRST_VISIT_SAMPLES),
             budget.prediction_cost(config, sorted({L, *lengths})), budget.horizon_cost(config, MAX_EVAL_LENGTH),
             budget.carrier_cost(config, FIRST_VISIT_CARRIER_SEARCH))
    return sum(cost.seconds for cost in costs)


SEQUENCE_MULTIPLE = 16  # a model read by forward passes (not the single head) is measured up to 16 × L_train


def ladder(config: RunConfig, longest: int = FIRST_VISIT_LONGEST, offset: bool = True) -> tuple[int, ...]:
    """A run's length ladder, the one every reader measures on: the training length doubled
    (lengen_core.analysis.evaluate.doublings) up to `longest`, and k + 1 first where `offset` (the default
    request: the Dilution page's and the command line's evaluate; Compare asks the doublings alone). A model
    read by forward passes (not `config.single_head`) goes up to SEQUENCE_MULTIPLE × L_train at most, and
    MAX_SEQUENCE_LENGTH, and has no k + 1. The caller keeps those the run allows (`allowed`)."""
    task = config.task
    if not config.single_head:
        longest, offset = min(longest, SEQUENCE_MULTIPLE * task.train_length, MAX_SEQUENCE_LENGTH), False
    first = {task.offset + 1} if offset and task.offset + 1 <= longest else set()
    return tuple(sorted(first | set(doublings(task.train_length, longest=longest))))


def allowed(run: Run, lengths: Sequence[int]) -> tuple[int, ...]:
    """Those of `lengths` the run's encoding accepts (a learned table ends at its last row)."""
    kept = []
    for n in lengths:
        try:
            check_lengths(run.config, run.model, [n])
        except LengthError:
            continue
        kept.append(n)
    return tuple(kept)


def request_lengths(run: Run, longest: int = FIRST_VISIT_LONGEST) -> tuple[int, ...]:
    """The default request's lengths for this run (the Dilution page's first view)."""
    return allowed(run, ladder(run.config, longest))


def first_visit(run: Run) -> Shipped | None:
    """The default request measured (`lengen_core.measure.measure`, as trained, no budgets: it runs where
    the training ran), as the pieces `measure` takes back; None for a run without a closed form
    (a transformer, the shift task), whose pages measure it themselves."""
    if not run.config.single_head:
        return None
    m = measure(run, request_lengths(run), FIRST_VISIT_SAMPLES, seed=EVALUATION_SEED)
    predictions = {p.length: p for p in (*m.predictions, m.train_prediction) if p is not None}
    fitted = tuple(sorted(n for n in m.lengths if n >= m.train_length))
    return Shipped({FIRST_VISIT_SAMPLES: dict(zip(m.lengths, m.reports, strict=True))}, predictions,
                   m.predicted_horizon, m.fit, FIRST_VISIT_SAMPLES, fitted)


def first_visit_data(run: Run) -> dict[str, Any] | None:
    """Everything a run is saved with for its first visits: `first_visit` in `to_dict`'s form, and the carrier
    the Carrier page and Compare show first (`carrier_to_dict`); None for a run without a closed form."""
    shipped = first_visit(run)
    if shipped is None:
        return None
    found = extract_carrier(run.model, run.config, search_length=FIRST_VISIT_CARRIER_SEARCH)
    return {**to_dict(shipped), "carrier": carrier_to_dict(found, FIRST_VISIT_CARRIER_SEARCH)}


def carrier_to_dict(carrier: Carrier, search: int) -> dict[str, Any]:
    """A carrier as JSON, with the near-recurrence search it was extracted with (`searched` False: none was
    made, the carrier is measured, and it answers every search)."""
    fields = {f.name: getattr(carrier, f.name) for f in dataclasses.fields(carrier)}
    return {**{k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in fields.items()},
            "metrics": dataclasses.asdict(carrier.metrics), "baseline": dataclasses.asdict(carrier.baseline),
            "baseline_range": None if carrier.baseline_range is None else dataclasses.asdict(carrier.baseline_range),
            "near_recurrences": [dataclasses.asdict(r) for r in carrier.near_recurrences],
            "search": search, "searched": carrier.source == "analytic"}


def carrier_from_dict(data: Mapping[str, Any] | None, search: int) -> Carrier | None:
    """The stored carrier where it answers a search up to `search`, else None (extract it then). A carrier
    stored without its baseline range (before issue 27) is None too: its metrics came from sampled
    sequences, whose noise the exact metrics replace."""
    if not data or not data.get("baseline_range"):
        return None
    try:
        if data["searched"] and data["search"] != search:
            return None
        spread = data["baseline_range"]
        baseline_range = BaselineRange(**{k: tuple(v) if isinstance(v, list) else v for k, v in spread.items()})
        return Carrier(source=str(data["source"]), offsets=np.asarray(data["offsets"], dtype=np.int64),
                       values=np.asarray(data["values"], dtype=np.float64),
                       frequencies=np.asarray(data["frequencies"], dtype=np.float64),
                       amplitudes=np.asarray(data["amplitudes"], dtype=np.float64),
                       train_length=int(data["train_length"]), offset=int(data["offset"]),
                       singular_values=np.asarray(data["singular_values"], dtype=np.float64),
                       metrics=CarrierMetrics(**data["metrics"]), baseline=CarrierMetrics(**data["baseline"]),
                       near_recurrences=tuple(NearRecurrence(**r) for r in data["near_recurrences"]),
                       baseline_range=baseline_range)
    except (KeyError, TypeError, ValueError):
        return None


def to_dict(shipped: Shipped) -> dict[str, Any]:
    """The JSON form (the presets' precomputed files and a stored run's first-visit file share it):
    {"evaluations": {samples: {length: LengthReport fields}}, "predictions": {length: Prediction fields},
    "horizon": Horizon fields or None, "fit": FitResult fields with the "samples" and "lengths" (≥ L_train)
    it was fitted to, or None, "format": FORMAT}."""
    return {"format": FORMAT,
            "evaluations": {str(s): {str(n): dataclasses.asdict(r) for n, r in by_length.items()}
                            for s, by_length in shipped.evaluations.items()},
            "predictions": {str(n): dataclasses.asdict(p) for n, p in shipped.predictions.items()},
            "horizon": None if shipped.horizon is None else dataclasses.asdict(shipped.horizon),
            "fit": None if shipped.fit is None else {**dataclasses.asdict(shipped.fit), "samples": shipped.fit_samples,
                                                     "lengths": list(shipped.fit_lengths)}}


def _stale_fit(fit: FitResult, law: Mapping[str, Any] | None) -> bool:
    """A law stored by an older fit: without the interval over the lengths fitted (or a weighted law without its
    plain twin), or a status the fit no longer gives to these numbers. `measure` then fits the stored numbers
    anew (a fraction of a second), so old files and presets stay readable."""
    if law is None:
        return fit.status == "fitted"
    return law.get("m_out_lengths_low") is None or (bool(law.get("key_lengths")) and law.get("plain") is None)


def from_dict(data: Mapping[str, Any] | None) -> Shipped | None:
    """`to_dict`'s inverse; None for nothing, another format or a damaged dictionary (the run is then
    measured as if nothing were stored)."""
    if not data or data.get("format", FORMAT) != FORMAT:
        return None
    try:
        evaluations = {int(s): {int(n): LengthReport(**r) for n, r in by_length.items()}
                       for s, by_length in data.get("evaluations", {}).items()}
        predictions = {int(n): Prediction(**p) for n, p in data.get("predictions", {}).items()}
        horizon = None if data.get("horizon") is None else Horizon(**data["horizon"])
        fit, fit_samples, fit_lengths = None, None, ()
        if data.get("fit") is not None:
            found = dict(data["fit"])
            fit_samples, fit_lengths = int(found.pop("samples")), tuple(int(n) for n in found.pop("lengths"))
            law = found.pop("fit")
            fit = FitResult(**found, fit=None if law is None else DilutionFit.from_dict(law))
            if _stale_fit(fit, law):  # stored before the fit said `no_dilution` and gave both laws: fitted anew
                fit, fit_samples, fit_lengths = None, None, ()
    except (TypeError, ValueError, AttributeError, KeyError):
        return None
    return Shipped(evaluations, predictions, horizon, fit, fit_samples, fit_lengths)

"""Measurements under inference rules shipped with the presets (scripts/build_presets.py --rules), so the
"long-context rules" lesson's steps and the Dilution page's default rules open at once on a preset:

    found = shipped_rule(run, "log-n", lengths, samples)   # None: not shipped for this request, measure it

A rule's measurement (lengen_core.measure.measure under the rule: its evaluation, its prediction at every
length, its law and its predicted horizon's search) costs seconds to a minute on two cores, since every
length under a rule needs its own sweep over the keys; a lesson asks the same few requests of one preset
every time. One JSON file a run, `<run id>.json` under `RULES_ROOT`, maps each request (`request_key`: the
rule's label, the samples and the lengths, at EVALUATION_SEED) to the whole `Measurement` (`to_dict`),
computed by the very call the app makes, so reading it changes no number: it only skips the work. The
run's verdict is not stored: it is the run's own, read from the run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lengen.store import PRECOMPUTED_ROOT
from lengen_core.analysis.dilution import Prediction
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.analysis.fit import DilutionFit, FitResult
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.trust import PredictionStatus
from lengen_core.measure import EVALUATION_SEED, Measurement
from lengen_core.training import Run

RULES_ROOT = PRECOMPUTED_ROOT / "rules"
FORMAT = 1  # of a shipped measurement (`to_dict`); another number is not read (measured again instead)


def request_key(label: str, lengths: Sequence[int], samples: int) -> str:
    """One request as the file keys it: 'log-n|256|4,16,32'."""
    return f"{label}|{samples}|{','.join(str(int(n)) for n in lengths)}"


def to_dict(m: Measurement) -> dict[str, Any]:
    """A single-head run's measurement as JSON (every field but the verdict, which is the run's)."""
    if not m.closed_form:
        raise ValueError("only a single-head run's measurement under a rule is shipped")
    data = dataclasses.asdict(m)
    del data["verdict"]
    return {"format": FORMAT, **data}


def _horizon(data: Mapping[str, Any] | None) -> Horizon | None:
    return None if data is None else Horizon(**data)


def _prediction(data: Mapping[str, Any] | None) -> Prediction | None:
    return None if data is None else Prediction(**data)


def from_dict(data: Mapping[str, Any], run: Run) -> Measurement | None:
    """`to_dict`'s inverse for `run`; None for another format, another run or a damaged dictionary."""
    if data.get("format") != FORMAT or data.get("run_id") != run.run_id:
        return None
    try:
        fit = dict(data["fit"])
        law = fit.pop("fit")
        status = data["prediction_status"]
        return Measurement(
            run_id=data["run_id"], rule=data["rule"], lengths=tuple(data["lengths"]), samples=int(data["samples"]),
            seed=int(data["seed"]), train_length=int(data["train_length"]), verdict=run.verdict,
            reports=tuple(LengthReport(**r) for r in data["reports"]),
            predictions=tuple(Prediction(**p) for p in data["predictions"]),
            train_prediction=_prediction(data["train_prediction"]),
            fit=FitResult(**fit, fit=None if law is None else DilutionFit.from_dict(law)),
            measured_horizon=_horizon(data["measured_horizon"]), predicted_horizon=_horizon(data["predicted_horizon"]),
            horizon_ceiling=data["horizon_ceiling"], horizon_note=data["horizon_note"],
            prediction_status=None if status is None else PredictionStatus(**status),
            single_head=data["single_head"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def shipped_path(run_id: str, root: Path = RULES_ROOT) -> Path:
    return root / f"{run_id}.json"


def shipped_requests(run_id: str, root: Path = RULES_ROOT) -> dict[str, Any]:
    """The run's shipped file as read: request key -> `to_dict`'s form ({} for none)."""
    path = shipped_path(run_id, root)
    return json.loads(path.read_text()) if path.is_file() else {}


def shipped_rule(run: Run, label: str, lengths: Sequence[int], samples: int, seed: int = EVALUATION_SEED,
                 root: Path = RULES_ROOT, found: Mapping[str, Any] | None = None) -> Measurement | None:
    """The shipped measurement of `run` under the rule `label` for exactly this request, or None (not shipped).
    `found`: the run's file already read (`shipped_requests`), so a caller reading many requests reads it once."""
    if seed != EVALUATION_SEED:
        return None
    data = (shipped_requests(run.run_id, root) if found is None else found).get(request_key(label, lengths, samples))
    if data is None:
        return None
    m = from_dict(data, run)
    return m if m is not None and m.lengths == tuple(lengths) and m.samples == samples else None


def ship_rules(run_id: str, measurements: Iterable[Measurement], root: Path = RULES_ROOT) -> Path:
    """Write `measurements` (each of run `run_id`) as its shipped file, replacing any before."""
    root.mkdir(parents=True, exist_ok=True)
    path = shipped_path(run_id, root)
    found = {}
    for m in measurements:
        if m.run_id != run_id:
            raise ValueError(f"a measurement of {m.run_id} is not one of {run_id}")
        found[request_key(m.rule, m.lengths, m.samples)] = to_dict(m)
    path.write_text(json.dumps(found))
    return path

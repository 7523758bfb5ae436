"""The answers of `evaluate` (at lengths, or a delay task's run against the delay) and of `transfer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lengen.results.common import Where, number, verdict_json
from lengen_core.analysis.delays import DelayCurve
from lengen_core.analysis.dilution import Prediction
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.analysis.fit import NOT_ASKED
from lengen_core.analysis.sequence import SequenceReport
from lengen_core.analysis.verdict import Verdict
from lengen_core.config import RunConfig
from lengen_core.measure import NOT_SEARCHED, Measurement
from lengen_core.thresholds import ACCURACY_BAR
from lengen_core.transfer import Transfer


def length_row(report: LengthReport | SequenceReport, prediction: Prediction | None, fitted: float | None, train_length: int,
               rule: str) -> dict[str, Any]:
    """One length of `evaluate --json`: the report's fields (a transformer's accuracy by position as
    pairs), the prediction from the weights and the fitted law's p there (None where there is none)."""
    row = {key: value for key, value in vars(report).items() if key not in ("positions", "accuracy_by_position")}
    if isinstance(report, LengthReport):
        row["accuracy_beyond"] = report.accuracy if report.length > train_length else None
    else:
        row["rule"] = rule
        row["accuracy_by_position"] = [{"position": int(p), "accuracy": float(a)}
                                       for p, a in zip(report.positions, report.accuracy_by_position)]
    return {**row,
            "predicted_accuracy": None if prediction is None else prediction.accuracy,
            "predicted_vote_accuracy": None if prediction is None else prediction.vote_accuracy,
            "predicted_target_mass": None if prediction is None else prediction.target_mass,
            "fitted_target_mass": fitted}


@dataclass(frozen=True)
class Evaluation:
    """`evaluate` at lengths: lengen_core.measure's one measurement, as every page formats it."""

    measurement: Measurement
    task: str
    vocab_size: int
    where: Where

    def rows(self) -> list[dict[str, Any]]:
        m = self.measurement
        predictions = m.predictions or [None] * len(m.lengths)
        return [length_row(report, prediction, fitted, m.train_length, m.rule)
                for report, prediction, fitted in zip(m.reports, predictions, m.fitted_masses, strict=True)]

    def to_json(self) -> dict[str, Any]:
        m = self.measurement
        fit = m.fit.fit
        measured, predicted = m.measured_horizon, m.predicted_horizon
        return {"run_id": m.run_id, "rule": m.rule, "task": self.task, "chance": 1 / self.vocab_size,
                "verdict": verdict_json(m.verdict), "lengths": self.rows(),
                "fit": None if fit is None else fit.to_dict(), "fit_status": m.fit.status,
                "fit_reason": f"{m.fit.reason[:-1]}: --predict makes it" if m.fit is NOT_ASKED else m.fit.reason,
                "horizon_accuracy": ACCURACY_BAR,
                "predicted_horizon": None if predicted is None else predicted.length,
                "predicted_horizon_below": None if predicted is None else predicted.below,
                "predicted_horizon_ceiling": m.horizon_ceiling, "predicted_horizon_note": m.horizon_note,
                "predicted_horizon_reason": self.horizon_reason,
                "prediction_status": None if m.prediction_status is None else m.prediction_status.status,
                "prediction_status_reason": None if m.prediction_status is None else m.prediction_status.reason,
                "measured_horizon": None if measured is None else measured.length,
                "measured_horizon_below": None if measured is None else measured.below,
                # as the app words them (Horizon.text), for the readable output
                "measured_horizon_text": None if measured is None else measured.text,
                "predicted_horizon_text": None if predicted is None else predicted.text, **self.where.to_json()}

    @property
    def horizon_reason(self) -> str | None:
        """Why there is no predicted horizon (None: there is one), naming the flag that searches it."""
        m = self.measurement
        return f"{m.horizon_reason}; --horizon searches it" if m.horizon_note == NOT_SEARCHED else m.horizon_reason

    def text(self) -> str:
        answer = self.to_json()
        header = (f"{'length':>9} {'accuracy':>9} {'beyond':>7} {'vote':>7} {'predicted':>9} {'p':>7} {'p pred':>7} "
                  f"{'argmax':>8}")
        lines = [f"{header} {'rule':>8}"]
        lines += [  # vote: the ideal vote readout (the most attended token answers) on the same sequences
            f"{r['length']:>9} {r['accuracy']:>9.3f} {number(r['accuracy_beyond']):>7} "
            f"{number(r.get('vote_accuracy')):>7} {number(r['predicted_accuracy']):>9} {r['target_mass']:>7.3f} "
            f"{number(r['predicted_target_mass']):>7} {r['argmax_key']:>8} {r['rule']:>8}"
            for r in answer["lengths"]
        ]
        lines.append(f"verdict: {answer['verdict']['reason']}")
        lines.append(("fitted law: " if answer["fit"] else "") + answer["fit_reason"])
        return "\n".join([*lines, *self._horizon_lines(), f"device: {self.where.device_name}"])

    def _horizon_lines(self) -> list[str]:
        """The horizons (accuracy ≥ the bar): measured on the lengths asked, predicted from the weights or why
        there is no prediction; and whether the prediction is trusted for this run."""
        m, bar, lines = self.measurement, ACCURACY_BAR, []
        measured, predicted = m.measured_horizon, m.predicted_horizon
        if measured is not None:  # (a transformer's run has none: no closed form)
            held = measured.length is not None  # else the text says it fell at the training length
            lines.append(f"measured horizon (accuracy ≥ {bar:g} at the lengths asked): {measured.text}"
                         + (f"; below {bar:g} at {measured.below:,}" if held and measured.below is not None else ""))
        if predicted is not None and predicted.length is not None:
            lines.append(f"predicted horizon (from the weights, looked for up to {m.horizon_ceiling:,}): "
                         f"{predicted.text}")
        elif reason := self.horizon_reason:
            lines.append(f"predicted horizon: {'' if m.horizon_note == NOT_SEARCHED else 'none: '}{reason}")
        if m.prediction_status is not None:
            lines.append(f"prediction: {m.prediction_status.status}: {m.prediction_status.reason}")
        return lines


@dataclass(frozen=True)
class DelayEvaluation:
    """`evaluate` on a delay task's run: accuracy against the delay at the training length."""

    run_id: str
    task: str
    verdict: Verdict | None
    curve: DelayCurve
    where: Where

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "task": self.task, "verdict": verdict_json(self.verdict), **self.curve.to_dict(),
                **self.where.to_json()}

    def text(self) -> str:
        curve = self.curve
        lines = [f"{'delay':>6} {'seen':>5} {'accuracy':>9} {'95% interval':>14} {'source mass':>12} {'margin':>7}"]
        lines += [f"{p.delay:>6} {'yes' if p.seen else 'no':>5} {p.accuracy:>9.3f} "
                  f"{p.accuracy_low:>6.3f}–{p.accuracy_high:<7.3f} {p.source_mass:>12.3f} {p.source_margin:>7.2f}"
                  for p in curve.points]
        lines.append(f"mean accuracy: seen {number(curve.mean_accuracy(True))}, unseen "
                     f"{number(curve.mean_accuracy(False))} (chance {curve.chance:.3f}; {curve.samples} sequences a "
                     f"delay at length {curve.length}; carrier head {curve.head})")
        lines.append(f"verdict: {self.verdict.reason if self.verdict is not None else None}")
        lines.append(f"device: {self.where.device_name}")
        return "\n".join(lines)


@dataclass(frozen=True)
class TransferResult:
    """`transfer`: steps to learn delays B after delays A, against from scratch."""

    config: RunConfig
    transfer: Transfer

    def to_json(self) -> dict[str, Any]:
        return {"run_config": self.config.to_dict(), **self.transfer.to_dict()}

    def text(self) -> str:
        t = self.transfer
        steps = lambda value: f"not within {t.budget:,} steps" if value is None else f"{value:,} steps"
        word = "positive" if t.speedup > 1 else "negative" if t.speedup < 1 else "no"
        return (f"delays {t.after} learned in {steps(t.steps_from_scratch)} from scratch, "
                f"{steps(t.steps_from_pretrained)} after {t.pretrain_steps:,} steps on delays {t.before} (which alone "
                f"gave {t.pretrain_accuracy_on_b:.2f} on them): {word} transfer, ×{t.speedup:.2f} (learned: batch "
                f"accuracy ≥ {t.bar:g} for {t.patience} steps)")

"""The optimisation experiment of C1: what gradient descent does to a learned position table.

    trace = trace_training(config, every=10, lengths=(64,))   # train, watching the table
    trace.row_gradient_norms        # (records, max_positions): ‖∂loss/∂P_t‖ at the recorded steps
    trace.largest_row_gradient      # (max_positions,): the largest over every step, not just those
    trace.evaluations               # accuracy at `lengths` before training and at each recorded step
    TrainingTrace.from_dict(json.loads(text))   # a trace written by `trace.to_dict(rows=64)`: plain JSON

It runs the ordinary training of `config` (`lengen_core.training.Training`: the same seed, data and
steps, so for a stored run it replays exactly the training that made it) and only observes it: a
hook on the position table reads the gradient of each step's loss before the optimiser uses it.

What it can tell apart. From a random start (`init random`), whether rows past the training length
ever get a gradient: in training no batch is longer than L_train, so the rows ≥ L_train are never
gathered and their gradient is exactly zero at every step (the property test holds this for random
configs); with no weight decay Adam leaves them exactly at their initial values. From the
constructed head (`init constructed`, lengen_core.models.construct), whether training keeps the relative
rule (accuracy past the training length stays) or moves to a solution that only fits the training
range. What it cannot tell: the gradient here is the loss's; weight decay (an optimiser term, not a
gradient of the loss) still shrinks the untrained rows towards zero, which no rule is learned from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lengen_core.analysis.evaluate import LengthReport, check_lengths, evaluate
from lengen_core.config import RunConfig
from lengen_core.training import Training

TRACE_SEED = 12_345  # the evaluations' sequences: the pages' default evaluation seed


@dataclass(frozen=True)
class TrainingTrace:
    config: RunConfig
    gradient_steps: tuple[int, ...]  # steps whose gradient was recorded: 1, every, 2·every, …, the last
    row_gradient_norms: np.ndarray  # (len(gradient_steps), max_positions), or its first rows (`to_dict(rows)`)
    largest_row_gradient: np.ndarray  # (max_positions,): max over every step of training
    evaluation_steps: tuple[int, ...]  # 0 (the start), then the gradient steps
    evaluations: tuple[tuple[LengthReport, ...], ...]  # (len(evaluation_steps), len(lengths))
    lengths: tuple[int, ...]
    losses: tuple[float, ...]  # every step's loss

    def largest_gradient_beyond(self) -> float:
        """The largest gradient norm any row ≥ L_train got at any step (0.0 exactly when none did)."""
        return float(self.largest_row_gradient[self.config.task.train_length:].max(initial=0.0))

    def largest_gradient_within(self) -> float:
        """The same for the rows the training batches reach, 0 … L_train − 1."""
        return float(self.largest_row_gradient[: self.config.task.train_length].max(initial=0.0))

    def accuracy(self, length: int) -> np.ndarray:
        """Accuracy at `length` at each evaluation step."""
        column = self.lengths.index(length)
        return np.array([reports[column].accuracy for reports in self.evaluations])

    def to_dict(self, rows: int | None = None) -> dict[str, Any]:
        """Plain JSON-able data that `from_dict` turns back into this trace (floats exactly, as float64),
        with the per-step norms of the first `rows` position rows only when given (the largest norm of
        every row is kept whole, so `largest_gradient_beyond` reads the same)."""
        return {
            "config": self.config.to_dict(), "gradient_steps": list(self.gradient_steps),
            "row_gradient_norms": self.row_gradient_norms[:, :rows].astype(np.float64).tolist(),
            "largest_row_gradient": self.largest_row_gradient.astype(np.float64).tolist(),
            "evaluation_steps": list(self.evaluation_steps),
            "evaluations": [[dataclasses.asdict(report) for report in reports] for reports in self.evaluations],
            "lengths": list(self.lengths), "losses": list(self.losses),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingTrace:
        """The trace `to_dict` wrote (the norms float32 again, as recorded)."""
        norms = np.asarray(data["row_gradient_norms"], dtype=np.float32)
        return cls(
            config=RunConfig.from_stored(data["config"]), gradient_steps=tuple(data["gradient_steps"]),
            row_gradient_norms=norms if norms.ndim == 2 else norms.reshape(0, 0),  # [] when no step was recorded
            largest_row_gradient=np.asarray(data["largest_row_gradient"], dtype=np.float32),
            evaluation_steps=tuple(data["evaluation_steps"]),
            evaluations=tuple(tuple(LengthReport(**report) for report in reports) for reports in data["evaluations"]),
            lengths=tuple(data["lengths"]), losses=tuple(data["losses"]),
        )


def trace_training(config: RunConfig, every: int, lengths: Sequence[int] = (), samples: int = 256,
                   device: str = "cpu") -> TrainingTrace:
    """Train `config` (a learned-position head) to its end, recording each row's gradient norm at
    step 1 and every `every` steps (and the last), and the accuracy at `lengths` (over `samples`
    evaluation sequences) at the start and at each of those steps."""
    if config.model.encoding != "learned" or not config.single_head:
        raise ValueError("the trace reads the learned position table of a single head on the retrieval task")
    if every < 1:
        raise ValueError(f"every must be at least 1 step, got {every}")
    training = Training(config, device)
    model = training.model
    check_lengths(config, model, lengths)
    table = model.encoding.table
    step_norms: list[torch.Tensor] = []
    hook = table.register_hook(lambda grad: step_norms.append(grad.detach().norm(dim=1).cpu()))  # (max_positions,)
    gradient_steps, records, evaluations = [], [], [_evaluate(model, config, lengths, samples)]
    largest = torch.zeros(table.shape[0])
    try:
        for progress in training:
            norms = step_norms.pop()
            largest = torch.maximum(largest, norms)
            if progress.step == 1 or progress.step % every == 0 or progress.finished:
                gradient_steps.append(progress.step)
                records.append(norms)
                evaluations.append(_evaluate(model, config, lengths, samples))
    finally:
        hook.remove()
    return TrainingTrace(
        config=config, gradient_steps=tuple(gradient_steps),
        row_gradient_norms=torch.stack(records).numpy() if records else np.zeros((0, table.shape[0])),
        largest_row_gradient=largest.numpy(), evaluation_steps=(0, *gradient_steps),
        evaluations=tuple(evaluations), lengths=tuple(lengths), losses=tuple(training.history["loss"]),
    )


@torch.no_grad()
def _evaluate(model: torch.nn.Module, config: RunConfig, lengths: Sequence[int], samples: int) -> tuple[LengthReport, ...]:
    if not lengths:
        return ()
    model.eval()
    reports = tuple(evaluate(model, config, list(lengths), samples=samples, seed=TRACE_SEED))
    model.train()
    return reports

"""The verdict on a run: did it learn the task in range, and is it at chance beyond?

Every readout of the lab means something only for a run that learned its task: a dilution law fitted
to a head that never selected offset k, or a carrier "aligned" by a margin of 0.02 nats, describes
noise. So each run is judged once, when it is trained, on fresh sequences (an evaluation seed of its
own, not the training data), and every page and command reads the verdict before it shows a claim.

- **learned**: accuracy at the training length ≥ `ACCURACY_BAR` (0.9), from `VERDICT_ANSWERS`
  answers (2,048: the 95% Wilson interval is about ±0.013 there). Chance is 1/V; a run between
  chance and 0.9 learned something, not the task.
- **at chance beyond**: at twice the training length (the nearest length the encoding allows past
  the training length), accuracy over the positions beyond the training length is no better than
  chance: its 95% interval's lower end is within `CHANCE_TOLERANCE` of 1/V. `None` when no length
  past the training length is allowed (a learned table that ends there).

For the retrieval task the answers are the queries of 2,048 sequences; for the shift task every
position t ≥ k answers, so fewer sequences give the same number of answers (they are correlated
within a sequence, so the interval there is a little optimistic).

For a delay task (delay-copy, selective-copy) the length never changes: "learned" reads its training
delays at its training length (the answers split evenly between them), chance is one over the content
tokens, and there is no "beyond" length; what it does at unseen delays is lengen_core.analysis.delays'.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from lengen_core.analysis.delays import delay_verdict_accuracy
from lengen_core.analysis.evaluate import check_lengths, evaluate, wilson_interval
from lengen_core.analysis.sequence import evaluate_sequence
from lengen_core.config import DELAY_TASKS, RunConfig
from lengen_core.models.encodings import LengthError
from lengen_core.tasks import content_vocab
from lengen_core.thresholds import ACCURACY_BAR, CHANCE_TOLERANCE

VERDICT_ANSWERS = 2_048
VERDICT_TOKENS = 1 << 18  # at most this many tokens per forward-pass evaluation (transformers)
VERDICT_SEED = 271_828  # fresh sequences: neither the training stream nor the pages' default seed


@dataclass(frozen=True)
class Verdict:
    learned: bool
    in_range_accuracy: float  # at the training length
    in_range_low: float  # 95% Wilson interval
    in_range_high: float
    beyond_length: int | None  # where "beyond" was measured; None when no longer length is allowed
    beyond_accuracy: float | None  # over the positions past the training length
    beyond_low: float | None
    beyond_high: float | None
    at_chance_beyond: bool | None
    chance: float
    answers: int  # answers behind each accuracy
    reason: str  # one sentence a person reads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


def _beyond_length(model: torch.nn.Module, config: RunConfig) -> int | None:
    """Twice the training length, or the longest allowed length past it; None if there is none."""
    train_length = config.task.train_length
    for length in (2 * train_length, train_length + 1):
        try:
            check_lengths(config, model, [length])
        except LengthError:
            continue
        return length
    return None


def _accuracy(model: torch.nn.Module, config: RunConfig, length: int) -> tuple[int, int]:
    """(correct answers, answers) at `length`: the query (retrieval) or positions past L_train (shift)."""
    task = config.task
    if config.single_head:
        (report,) = evaluate(model, config, [length], samples=VERDICT_ANSWERS, seed=VERDICT_SEED)
        return round(report.accuracy * report.samples), report.samples
    if task.task == "retrieval":
        answers_per_sequence = 1
    else:  # shift: positions ≥ k in range, positions ≥ L_train beyond
        first = task.offset if length <= task.train_length else task.train_length
        answers_per_sequence = length - first
    wanted = math.ceil(VERDICT_ANSWERS / answers_per_sequence)
    samples = max(16, min(wanted, VERDICT_TOKENS // length))  # a large transformer: fewer, not slower
    (report,) = evaluate_sequence(model, config, [length], samples=samples, seed=VERDICT_SEED)
    accuracy = report.accuracy if length <= task.train_length else report.accuracy_beyond
    answers = samples * answers_per_sequence
    return round(accuracy * answers), answers


def _reason(config: RunConfig, learned: bool, accuracy: float, at_chance: bool | None, model) -> str:
    L, chance = config.task.train_length, 1 / content_vocab(config.task)
    if not learned:
        why = getattr(model.encoding, "single_head_limit", None) if config.model.minimal else None
        text = (f"did not learn the task: accuracy {accuracy:.2f} at the training length {L} "
                f"(needs ≥ {ACCURACY_BAR:.2f}; chance {chance:.3f}).")
        return f"{text} {why}" if why else text
    if at_chance is None and config.task.task in DELAY_TASKS:
        return (f"learned the task ({accuracy:.2f} over its training delays {config.task.delays} at the training "
                f"length {L}).")
    if at_chance is None:
        return f"learned the task ({accuracy:.2f} at the training length {L}); no longer length is allowed."
    beyond = "at chance" if at_chance else "above chance"
    return f"learned the task ({accuracy:.2f} at the training length {L}); {beyond} past it."


@torch.no_grad()
def judge(model: torch.nn.Module, config: RunConfig) -> Verdict:
    """The verdict on a trained model (see the module docstring for the definitions)."""
    chance = 1 / content_vocab(config.task)
    delay_task = config.task.task in DELAY_TASKS
    if delay_task:
        correct, answers = delay_verdict_accuracy(model, config, VERDICT_ANSWERS, VERDICT_SEED)
    else:
        correct, answers = _accuracy(model, config, config.task.train_length)
    low, high = wilson_interval(correct, answers)
    learned = correct / answers >= ACCURACY_BAR
    beyond_length = None if delay_task else _beyond_length(model, config)
    beyond = beyond_low = beyond_high = at_chance = None
    if beyond_length is not None:
        beyond_correct, beyond_answers = _accuracy(model, config, beyond_length)
        beyond = beyond_correct / beyond_answers
        beyond_low, beyond_high = wilson_interval(beyond_correct, beyond_answers)
        at_chance = beyond_low <= chance + CHANCE_TOLERANCE
    return Verdict(
        learned=learned, in_range_accuracy=correct / answers, in_range_low=low, in_range_high=high,
        beyond_length=beyond_length, beyond_accuracy=beyond, beyond_low=beyond_low, beyond_high=beyond_high,
        at_chance_beyond=at_chance, chance=chance, answers=answers,
        reason=_reason(config, learned, correct / answers, at_chance, model),
    )

"""Distance generalisation on the delay tasks (lengen_core.tasks): accuracy against the delay at the
training length, for the delays a run trained on and the ones it never saw, with what its attention
does at each delay; and transfer, how training on delays A changes how fast delays B are learned.

The context length never changes here: a delay the run never saw is a new *distance* between the
query and the source at a length it trained at, not a new length (docs/science.md, the delay tasks).

Per delay d the report reads `samples` fresh sequences (their own seed, one stream per delay so a
delay's numbers do not depend on which other delays are asked for):
- accuracy at the query, with its 95% Wilson interval;
- the attention mass on the source, for the head that puts most on it over the run's own delays
  (the carrier head: the only head of the minimal model);
- the logit margin there: the source's logit minus the largest other visible key's, averaged. Above 0
  the head ranks the source first; this is the carrier's view of the result, a kernel over the delay
  that peaks where the run trained when it learned the distances themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from lengen_core.analysis.evaluate import wilson_interval
from lengen_core.config import DELAY_TASKS, MAX_EVAL_SAMPLES, ConfigError, RunConfig, format_delays, parse_delays
from lengen_core.tasks import content_vocab, delay_tokens

DELAY_SEED = 12_345  # the evaluation seed by default, the Delays page's and `evaluate`'s (lengths or delays)
DELAY_SAMPLES = 256  # sequences per delay (or length) by default, the same for both
DELAY_TOKENS = 1 << 20  # at most samples × length × delays tokens in one request (a few seconds on 2 cores)


@dataclass(frozen=True)
class DelayPoint:
    delay: int
    seen: bool  # among the run's training delays
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    source_mass: float  # the carrier head's mean attention weight on the source
    source_margin: float  # its mean logit on the source minus the largest other visible key's


@dataclass(frozen=True)
class DelayCurve:
    run_delays: tuple[int, ...]
    length: int
    samples: int
    seed: int
    chance: float
    head: str  # "L{layer}H{head}" of the carrier head
    points: tuple[DelayPoint, ...] = field(default_factory=tuple)

    def seen(self) -> list[DelayPoint]:
        return [p for p in self.points if p.seen]

    def unseen(self) -> list[DelayPoint]:
        return [p for p in self.points if not p.seen]

    def mean_accuracy(self, seen: bool) -> float | None:
        points = self.seen() if seen else self.unseen()
        return sum(p.accuracy for p in points) / len(points) if points else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["mean_seen"], data["mean_unseen"] = self.mean_accuracy(True), self.mean_accuracy(False)
        return data


def check_delay_run(config: RunConfig) -> None:
    if config.task.task not in DELAY_TASKS:
        raise ConfigError(f"accuracy against the delay needs a run of the {' or '.join(DELAY_TASKS)} task; this run "
                          f"is on the {config.task.task} task")


def default_delays(config: RunConfig) -> tuple[int, ...]:
    """Every delay the context holds: 1 … L-1 (the run's own and every unseen one)."""
    return tuple(range(1, config.task.train_length))


def check_delays(config: RunConfig, delays: Sequence[int] | str, samples: int) -> tuple[int, ...]:
    """The delays to evaluate, checked against the run's length and the request's budget."""
    check_delay_run(config)
    wanted = parse_delays(delays) if isinstance(delays, str) else tuple(sorted(set(delays)))
    L = config.task.train_length
    if not wanted:
        raise ConfigError(f"name at least one delay, 1 to {L - 1}")
    if wanted[0] < 1 or wanted[-1] >= L:
        raise ConfigError(f"delays {format_delays(wanted)}: at the training length {L} a delay is 1 to {L - 1} "
                          "(the context length stays the one the run trained at)")
    if not isinstance(samples, int) or not 1 <= samples <= MAX_EVAL_SAMPLES:
        raise ConfigError(f"samples {samples!r} is out of range: allowed 1 to {MAX_EVAL_SAMPLES}")
    if samples * L * len(wanted) > DELAY_TOKENS:
        raise ConfigError(f"{samples} samples × length {L} × {len(wanted)} delays is {samples * L * len(wanted):,} "
                          f"tokens, more than one request may read ({DELAY_TOKENS:,}): ask for fewer samples or delays")
    return wanted


@torch.no_grad()
def _readings(model: torch.nn.Module, config: RunConfig, delay: int, samples: int, seed: int
              ) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(correct answers, per-head mean source mass (H_all,), per-head mean source margin (H_all,))."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed * 1_000 + delay)
    L = config.task.train_length
    tokens, answers = delay_tokens(config.task, torch.full((samples,), delay), generator)
    tokens, answers = tokens.to(device), answers.to(device)
    logits = model(tokens, query_start=L - 1)  # (B, 1, V)
    correct = int((logits[:, -1].argmax(-1) == answers[:, 0]).sum())
    source = L - 1 - delay
    masses, margins = [], []
    for pattern in model.attend(tokens, query_start=L - 1):
        weights, scores = pattern.weights[:, :, -1].float(), pattern.logits[:, :, -1].float()  # (B, H, T)
        masses.append(weights[..., source].mean(0))
        others = torch.cat([scores[..., :source], scores[..., source + 1:]], dim=-1)
        margins.append((scores[..., source] - others.max(-1).values).mean(0))
    return correct, torch.cat(masses).cpu(), torch.cat(margins).cpu()


def _head_names(model: torch.nn.Module, config: RunConfig) -> list[str]:
    heads = 1 if config.model.minimal else config.model.n_heads
    layers = getattr(model, "n_layers", 1)
    return [f"L{layer}H{head}" for layer in range(layers) for head in range(heads)]


def delay_curve(model: torch.nn.Module, config: RunConfig, delays: Sequence[int] | str | None = None,
                samples: int = DELAY_SAMPLES, seed: int = DELAY_SEED) -> DelayCurve:
    """Accuracy, source mass and source margin at each delay (module docstring); `delays` default:
    every delay the context holds."""
    wanted = check_delays(config, default_delays(config) if delays is None else delays, samples)
    was_training = model.training
    model.eval()
    try:
        readings = {d: _readings(model, config, d, samples, seed) for d in wanted}
        own = config.task.delay_set
        missing = [d for d in own if d not in readings]  # the carrier head is chosen on the run's own delays
        for d in missing:
            readings[d] = _readings(model, config, d, min(samples, 64), seed)
    finally:
        model.train(was_training)
    best = int(torch.stack([readings[d][1] for d in own]).mean(0).argmax())
    points = []
    for d in wanted:
        correct, mass, margin = readings[d]
        low, high = wilson_interval(correct, samples)
        points.append(DelayPoint(d, d in own, correct / samples, low, high, float(mass[best]), float(margin[best])))
    return DelayCurve(own, config.task.train_length, samples, seed, 1 / content_vocab(config.task),
                      _head_names(model, config)[best], tuple(points))


def delay_verdict_accuracy(model: torch.nn.Module, config: RunConfig, answers: int, seed: int) -> tuple[int, int]:
    """(correct, answers) over the run's own delays at its length, `answers` split evenly between them:
    what the verdict reads for a delay task."""
    own = config.task.delay_set
    per_delay = max(1, math.ceil(answers / len(own)))
    curve = delay_curve(model, config, own, samples=min(per_delay, MAX_EVAL_SAMPLES), seed=seed)
    correct = sum(round(p.accuracy * curve.samples) for p in curve.points)
    return correct, curve.samples * len(own)

"""How far a run reaches: its horizon, the largest length at which accuracy stays ≥ ACCURACY_BAR.

Two figures, never mixed:
- **predicted**, from the weights alone (lengen_core.analysis.dilution.predict): the largest length up to the
  ceiling (2^20 tokens, or the end of a learned table) whose predicted accuracy is ≥ 0.9. Found by
  bisection, sped up by asking the prediction at several lengths at once: first every doubling of
  the training length (up to 64× in one sweep over the keys for a relative encoding; then up to
  1,024×, then the rest, each stage only if every doubling before it holds: the sweep to 2^20 costs
  64 times the one to 1,024× at L_train 16, so only a run that holds past 1,024× pays for it), then,
  between the last doubling that holds and the first that does not, SECTIONS evenly spaced lengths a
  round until the two are one token apart. Each call of the prediction has
  a fixed cost (its draws) besides the sweep, so a few calls of a few lengths beat many of one. The
  prediction uses fixed draws, so the answer is the same every time. Like any bisection it finds where accuracy *first* falls below 0.9 on that grid; accuracy that recovers
  further out (it does not on any run measured) would not extend it.
- **measured**, from an evaluation's lengths: the last measured length before accuracy first falls
  below 0.9. It is as fine as the lengths measured: the true crossing lies between it and the next
  measured length (`below`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import doublings
from lengen_core.analysis.rules import InferenceRule
from lengen_core.config import MAX_EVAL_LENGTH, RunConfig
from lengen_core.models.encodings import ENCODING_CLASSES
from lengen_core.thresholds import ACCURACY_BAR

SECTIONS = 7  # lengths asked per round of the bisection (3 bits a round): one sweep over the keys serves them all
NEAR_MULTIPLE = 64  # the doublings up to 64× the training length are asked first,
FAR_MULTIPLE = 1024  # then those up to 1,024×, then the rest, each only if every doubling before it holds
PROBES = 20  # live probes over a training (at most; and at least PROBE_STEPS steps apart)
PROBE_STEPS = 50
PROBE_DRAWS = 512  # the live probe's readout draws (the full prediction: GAUSSIAN_DRAWS); see live_probe
# A live probe's first cost estimate, in seconds (later probes go by the last one's measured time):
# per length asked, PROBE_DRAW_SECONDS · V³ · PROBE_DRAWS + PROBE_LENGTH_SECONDS; per key swept,
# PROBE_KEY_SECONDS · V³. Measured on one thread of the 2-core CPU (V 8–64, L 8–256, early in training):
# 2.1–3.8e-9 a draw unit, 1.6–2e-10 a key unit, ~5 ms a length. Whole probes of trained runs (V 8–32)
# took 0.3–0.6× this estimate, at V 64 1.2× (19 s: its draws outgrow the caches).
PROBE_DRAW_SECONDS, PROBE_KEY_SECONDS, PROBE_LENGTH_SECONDS = 3e-9, 2.5e-10, 0.004
PROBE_CALLS = 3  # the live probe's calls of the prediction, as measured: the doublings, then up to two rounds
LIVE_RESOLUTION = 1 / 8  # a live probe's horizon past the doublings: to within this share of itself
RULE_RESOLUTION = 1 / 32  # under an inference rule the horizon is found to within this share of itself


@dataclass(frozen=True)
class Horizon:
    length: int | None  # the largest length with accuracy ≥ threshold; None: below it at the training length
    below: int | None  # the first length found below the threshold past it; None: it holds up to `ceiling`
    ceiling: int  # the longest length looked at
    threshold: float = ACCURACY_BAR
    resolved: bool = True  # False: the search stopped at a budget (`afford`), between `length` and `below`
    relative: float = 0.0  # > 0: searched only until `below` − `length` ≤ this share of `length` (RULE_RESOLUTION)

    @property
    def text(self) -> str:
        """'1,234' / '≥ 1,048,576 (the longest looked at)' / 'none: below 0.9 already at the training length' /
        'between 8,192 and 16,384 (…budget…)'."""
        if self.length is None:
            return f"none: below {self.threshold:g} already at the training length"
        if not self.resolved:
            where = f"≥ {self.length:,}" if self.below is None else f"between {self.length:,} and {self.below:,}"
            return f"{where} (the search stopped at this server's budget)"
        if self.below is None:
            return f"≥ {self.length:,} (the longest looked at)"
        if self.relative and self.below - self.length > 1:
            return f"{self.length:,} (below {self.threshold:g} by {self.below:,})"
        return f"{self.length:,}"


def horizon_ceiling(model: torch.nn.Module) -> int:
    """The longest length the run can be asked about: 2^20 tokens, or the end of its learned table."""
    table = getattr(model.encoding, "table", None)
    return MAX_EVAL_LENGTH if table is None else min(MAX_EVAL_LENGTH, int(table.shape[0]))


def _first_below(accuracies: Sequence[float], threshold: float) -> int | None:
    return next((i for i, a in enumerate(accuracies) if not a >= threshold), None)  # NaN: not shown to hold


def search_horizon(accuracy_at: Callable[[list[int]], list[float]], train_length: int, ceiling: int,
                   threshold: float = ACCURACY_BAR, resolution: int = 1,
                   afford: Callable[[list[int]], bool] | None = None, relative: float = 0.0) -> Horizon:
    """The bisection of the module docstring on any accuracy function of a list of lengths, until the
    last length that holds and the first that does not are at most `resolution` tokens apart, or
    `relative` × the last that holds.
    `afford(lengths)`, asked before every call after the first: False stops the search there, with
    the bracket found so far (`resolved` False), so each step's cost is checked before it starts."""
    grid = sorted({*doublings(train_length, 64, longest=ceiling - 1), ceiling})
    stages = [[n for n in grid if n <= NEAR_MULTIPLE * train_length],  # where most runs fall: asked first
              [n for n in grid if NEAR_MULTIPLE * train_length < n <= FAR_MULTIPLE * train_length],
              [n for n in grid if n > FAR_MULTIPLE * train_length]]  # a sweep to 2^20 only for a run reaching past
    stages = [stage for stage in stages if stage]
    accuracies = accuracy_at(stages[0])
    for stage in stages[1:]:
        if _first_below(accuracies, threshold) is not None:  # NaN counts as below, as in `_first_below`
            break
        if afford is not None and not afford(stage):
            return Horizon(grid[len(accuracies) - 1], None, grid[len(accuracies) - 1], threshold, resolved=False)
        accuracies += accuracy_at(stage)
    first = _first_below(accuracies, threshold)
    if first == 0:
        return Horizon(None, train_length, ceiling, threshold)
    if first is None:
        return Horizon(ceiling, None, ceiling, threshold)
    good, bad = grid[first - 1], grid[first]
    while bad - good > max(1, resolution, int(relative * good)):
        inside = sorted({int(n) for n in np.linspace(good, bad, SECTIONS + 2).round()} - {good, bad})
        if afford is not None and not afford(inside):
            return Horizon(good, bad, ceiling, threshold, resolved=False, relative=relative)
        accuracies = accuracy_at(inside)
        first = _first_below(accuracies, threshold)
        if first is None:
            good = inside[-1]
        else:
            good, bad = (inside[first - 1] if first else good), inside[first]
    return Horizon(good, bad, ceiling, threshold, relative=relative)


def predicted_horizon(model: torch.nn.Module, config: RunConfig, threshold: float = ACCURACY_BAR,
                      ceiling: int | None = None, afford: Callable[[list[int]], bool] | None = None,
                      rule: InferenceRule | None = None, known: Mapping[int, float] | None = None) -> Horizon:
    """The predicted horizon of a single-head run (see the module docstring); `afford` as in search_horizon.
    `known`: accuracies already predicted under the rule at some lengths (a measurement's own prediction at
    its lengths, which are the doublings the search asks first), not predicted again; read under a rule only,
    where each length's prediction is a sweep of its own, so they are the very numbers the search would make.

    Under an inference `rule` (lengen_core.analysis.rules) each length needs its own sweep over its keys, so a
    round of the bisection costs SECTIONS sweeps instead of one: the search stops once the bracket is
    within RULE_RESOLUTION of the horizon (two rounds past the doublings) and says so in its text. There
    the lengths of a call are predicted one by one, in order, up to the first below the threshold
    (`first_below_in_order`): the search reads nothing past it, so the horizon is the one of the whole
    call, at about half its sweeps. The search reads only the model's own readout's accuracy, so the
    ideal readout's (half the draws' cost) is left out everywhere."""
    top = horizon_ceiling(model) if ceiling is None else ceiling
    ruled = rule is not None and not rule.trivial

    done = dict(known or {}) if ruled else {}

    def accuracies(lengths: list[int]) -> list[float]:
        missing = [n for n in lengths if n not in done]
        if missing:
            done.update((p.length, p.accuracy) for p in predict(model, config, missing, vote=False, rule=rule))
        return [done[n] for n in lengths]

    return search_horizon(first_below_in_order(accuracies, threshold) if ruled else accuracies,
                          config.task.train_length, top, threshold, afford=afford,
                          relative=RULE_RESOLUTION if ruled else 0.0)


def first_below_in_order(accuracy_at: Callable[[list[int]], list[float]],
                         threshold: float) -> Callable[[list[int]], list[float]]:
    """`accuracy_at` asked one length at a time, in the order given, until the first below `threshold`;
    the lengths after it are NaN (not shown to hold). `search_horizon` reads a call only up to its first
    length below the threshold (`_first_below`, the smallest of a stage), so its answer is the same; where
    each length costs a sweep of its own (under an inference rule) the lengths past the crossing are saved."""
    def lazily(lengths: list[int]) -> list[float]:
        found: list[float] = []
        for length in lengths:
            found += accuracy_at([length])
            if not found[-1] >= threshold:
                return found + [math.nan] * (len(lengths) - len(found))
        return found
    return lazily


def measured_horizon(lengths: Sequence[int], accuracies: Sequence[float], train_length: int,
                     threshold: float = ACCURACY_BAR) -> Horizon | None:
    """The measured horizon on the measured lengths at or past the training length (None: none measured)."""
    pairs = sorted((n, a) for n, a in zip(lengths, accuracies, strict=True) if n >= train_length)
    if not pairs:
        return None
    first = _first_below([a for _, a in pairs], threshold)
    ceiling = pairs[-1][0]
    if first is None:
        return Horizon(ceiling, None, ceiling, threshold)
    if first == 0:
        return Horizon(None, pairs[0][0], ceiling, threshold)
    return Horizon(pairs[first - 1][0], pairs[first][0], ceiling, threshold)


@dataclass(frozen=True)
class Probe:
    """The horizon and the far margin predicted from the weights during training (the live view)."""

    step: int
    horizon: int | None  # predicted, up to `ceiling`, to within a quarter of the training length
    ceiling: int  # the longest length it may look at: horizon_ceiling (2^20, or the end of a learned table)
    train_length: int
    m_out: float | None  # the far margin the predicted masses imply between L_train and 16 L_train
    seconds: float = 0.0  # what it took, as the training timed it (lengen_core.training)


def probe_interval(config: RunConfig) -> int:
    """The fewest steps between live probes (0: none, for a run the prediction does not cover): at
    most PROBES a training. Whether a due probe runs is the training's cost rule (lengen_core.training)."""
    if not config.single_head:
        return 0
    return max(PROBE_STEPS, -(-config.train.steps // PROBES))


def probe_seconds_estimate(config: RunConfig) -> float:
    """What one live probe of `config` should cost on one CPU thread, before any was timed: PROBE_CALLS
    calls of SECTIONS lengths each, each sweeping up to 64 L_train keys (every length's own keys, about
    twice that, for an encoding that is not relative). Seconds at V 16, L 16: 0.22; V 64, L 64: 9.3."""
    V, L = config.task.vocab_size, config.task.train_length
    keys = NEAR_MULTIPLE * L * (1 if ENCODING_CLASSES[config.model.encoding].relative else 2)  # one sweep serves every length
    per_call = SECTIONS * (PROBE_DRAW_SECONDS * V**3 * PROBE_DRAWS + PROBE_LENGTH_SECONDS) + PROBE_KEY_SECONDS * keys * V**3
    return PROBE_CALLS * per_call


@torch.no_grad()
def live_probe(model: torch.nn.Module, config: RunConfig, step: int) -> Probe:
    """A cheaper horizon and the far margin from its first call: m_out = −ln((1/p̂(16 L) − 1/p̂(L)) / 15 L),
    the two-zone law through two predicted masses. The horizon looks as far as the run can be asked about
    (`horizon_ceiling`, the Dilution page's bound: 2^20 tokens or the end of a learned table) by
    `search_horizon`'s stages: the doublings to 64× first, those past it only while every doubling holds,
    so a run that falls inside 64× costs what it did when the probe stopped there (up to PROBE_CALLS calls
    with PROBE_DRAWS draws and without the ideal readout's accuracy: 0.05 s at V 16, L 16, 2–8 s at V 64 on
    one CPU thread), and one that reaches further pays for its longer sweeps (a trained RoPE head at V 16,
    L 16: see test_live_probe; the training's cost rule then spaces its probes by the time they took).
    Resolved to within L_train/4 or an eighth of the horizon, whichever is coarser (one round of the
    bisection past the doublings). With PROBE_DRAWS draws the predicted accuracy is within about 0.01 of
    the full prediction's, so the horizon may differ from `predicted_horizon`'s where accuracy crosses 0.9
    slowly."""
    L = config.task.train_length
    ceiling = horizon_ceiling(model)
    masses: dict[int, float] = {}

    def accuracy_at(lengths: list[int]) -> list[float]:
        predictions = predict(model, config, lengths, draws=PROBE_DRAWS, vote=False)
        masses.update((p.length, p.target_mass) for p in predictions)
        return [p.accuracy for p in predictions]

    horizon = search_horizon(accuracy_at, L, ceiling, resolution=max(1, L // 4), relative=LIVE_RESOLUTION)
    far = 16 * L if 16 * L in masses else None
    rise = None if far is None else (1 / max(masses[far], 1e-300) - 1 / max(masses[L], 1e-300)) / (far - L)
    m_out = -math.log(rise) if rise is not None and rise > 0 else None
    return Probe(step, horizon.length, ceiling, L, m_out)

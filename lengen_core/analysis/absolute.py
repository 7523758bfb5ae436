"""Where absolute position comes from in a transformer whose logits see only relative offsets
(docs/science.md §12, issue 30 §2).

Under RoPE every logit depends on t − u alone, yet a trained RoPE transformer can still tell
absolute positions apart. Two sources can supply them, and this module measures each one:

- **The sink.** Position 0 has no keys before it: its residual stream is a closed system, the same
  for every sequence that starts with the same token. A head that puts a position-dependent share
  of its weight on key 0 ("sink-reading") hands every later query a signal of where it is.
  `AbsolutePosition.sink`: each head's mean weight on key 0 as a function of the query position
  t, beside 1 / (t + 1), the share a uniform head gives it.
- **The mask.** A softmax query at t normalises over the t + 1 keys the causal mask lets it see,
  so its denominator Z_t = Σ_{u ≤ t} e^{logit(t, u)} grows with t even when every logit is relative:
  lengen_core.analysis.mask, exact from the weights for layer 0 under RoPE, measured for every head
  (read here from the same passes as the sink).

How much absolute position the model holds is read with a **linear probe**: ridge regression from
each layer's residual stream (layer 0: the embeddings; layer l: after block l) to the query's
position t, fitted on half the sequences and scored by R² on the other half. Its baseline is the
same probe on untrained initialisations of the same config (`PROBE_BASELINE_SEEDS` seeds): the
causal mask alone already lets an untrained model average over a prefix whose length is the
position, so "the probe works" means "it beats that spread by `PROBE_MARGIN`".

**The interventions** (`AbsolutePosition.variants`): replace the first token's embedding by the mean embedding (the
sink's content goes, the mask stays), or shift every position by `POSITION_SHIFT` (under RoPE an
exact no-op up to float rounding: what changes is what the encoding made absolute). Each variant
reports accuracy, the probe and the sink weight. `analyse_absolute_position` computes all of it.

A probe's R² says how much of the position a *linear* read recovers from these sequences; it cannot
say that the model's own readout uses it. Everything here is pure: no budgets (the serving side
prices each request first), nothing printed, the model never changed (a shift reads a view of it).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lengen_core.analysis.evaluate import LengthError, check_lengths, sequence_tokens
from lengen_core.analysis.mask import DENOMINATOR_SEED, QuerySums, exact_log_denominator, has_denominator
from lengen_core.analysis.sequence import tokens_per_batch
from lengen_core.claims import PROBE_CLAIM, claim_words
from lengen_core.config import ConfigError, RunConfig
from lengen_core.models.encodings import PositionalEncoding
from lengen_core.models.initial import initial_model
from lengen_core.tasks import query_start, targets_of

PROBE_BASELINE_SEEDS = 4  # untrained initialisations (the run's seed and the next ones) the probe is compared with
PROBE_MARGIN = 0.1  # R² a trained layer must exceed the untrained layers' largest by, to "beat the baseline"
MAX_PROBE_LENGTH = 1_024  # the probe keeps every layer's residual stream of every sequence
PROBE_SAMPLES = 256  # sequences: half fit the probe, half score it
RIDGE = 1e-2  # the ridge penalty on standardised features, per fitted row
POSITION_SHIFT = 1_000  # the constant every position moves by in the shift intervention
PROBE_SEED, SINK_SEED = 13, DENOMINATOR_SEED  # the evaluation sequences' seeds (lengen_core.analysis.evaluate.sequence_tokens)
SINK_MULTIPLE = 4  # the sink and the denominators are read up to this × the training length (or the encoding's end)
VARIANTS = ("as trained", "first token → mean embedding", f"positions + {POSITION_SHIFT:,}")


def check_transformer(config: RunConfig) -> None:
    if config.model.minimal:
        raise ConfigError("the position probe, the sink and the interventions read a transformer's residual stream; "
                          "the minimal head has none (layers 0): choose a run with layers ≥ 1. Its mask share "
                          "(the softmax denominator against position, `mask_share`) is computed for any softmax run")


# ---------------------------------------------------------------------------------------------- forward


class ShiftedEncoding(PositionalEncoding):
    """`inner` with every position moved by `shift`: embed, rotate and bias all see position + shift."""

    def __init__(self, inner: PositionalEncoding, shift: int) -> None:
        super().__init__()
        self.inner, self.shift = inner, shift
        for flag in ("additive", "rotary", "relative", "trained_positions"):
            setattr(self, flag, getattr(inner, flag))

    def check_length(self, length: int) -> None:
        self.inner.check_length(length + self.shift)

    def embed(self, positions: torch.Tensor) -> torch.Tensor | None:
        return self.inner.embed(positions + self.shift)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.inner.rotate(x, positions + self.shift)

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor | None:
        return self.inner.bias(query_positions + self.shift, key_positions + self.shift)

    def logit_scale(self, query_positions: torch.Tensor) -> torch.Tensor | None:
        return self.inner.logit_scale(query_positions)


def _view(module: nn.Module, **children: nn.Module) -> nn.Module:
    """A shallow copy of `module` sharing its parameters, with some child modules replaced."""
    view = copy.copy(module)
    view._modules = dict(module._modules)
    view._modules.update(children)
    return view


def shifted(model: nn.Module, shift: int) -> nn.Module:
    """A view of the transformer `model` (weights shared, nothing changed) reading positions + `shift`."""
    encoding = ShiftedEncoding(model.encoding, shift)
    return _view(model, encoding=encoding,
                 blocks=nn.ModuleList(_view(block, encoding=encoding) for block in model.blocks))


@torch.no_grad()
def residual_streams(model: nn.Module, tokens: torch.Tensor, first: torch.Tensor | None = None,
                     observe=None) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Transformer.forward with every query (query_start 0), keeping each layer's residual stream:
    ([x_0 … x_L] each (B, T, C), readout logits (B, T, V)). `first` (C,) replaces position 0's token
    embedding. tests/unit/test_absolute.py holds the logits to the model's own forward."""
    T = tokens.shape[1]
    model.encoding.check_length(T)
    x = model.embed[tokens]  # (B, T, C)
    if first is not None:
        x = torch.cat((first.expand(x.shape[0], 1, -1), x[:, 1:]), dim=1)
    table = model.encoding.embed(torch.arange(T, device=tokens.device))
    if table is not None:
        x = x + table
    streams = [x]
    for layer, block in enumerate(model.blocks):
        x = block(x, 0, observe, layer)  # (B, T, C)
        streams.append(x)
    return streams, model.norm_final(x) @ model.W_U


@dataclass(frozen=True)
class Pass:
    """One variant's forward passes over the probe's sequences."""

    streams: list[np.ndarray]  # per layer 0 … L: (S, T, C) float32
    sink: np.ndarray  # (layers, H, T): mean weight on key 0
    log_denominator: np.ndarray  # (layers, H, T): ln of the mean softmax denominator Z_t
    accuracy: float  # over the supervised positions whose answer is not token 0
    scored: int  # positions scored per sequence


def _pass(model: nn.Module, config: RunConfig, tokens: torch.Tensor, first: torch.Tensor | None) -> Pass:
    S, T = tokens.shape
    sums = QuerySums(model.n_layers, config.model.n_heads, T)
    batch = max(1, tokens_per_batch(config) // T)
    streams, hits = [], []
    start = query_start(config.task, T)
    queries = torch.arange(start, T)
    answered = queries - config.task.offset if config.task.task == "shift" else torch.full_like(queries, T - 1 - config.task.offset)
    keep = answered != 0  # a replaced first token cannot be recalled: no position answers it
    for begin in range(0, S, batch):
        part = tokens[begin : begin + batch]
        layers, logits = residual_streams(model, part, first, sums)
        streams.append([x.cpu().float().numpy() for x in layers])
        right = logits[:, start:].argmax(-1).cpu() == targets_of(config.task, part.cpu())  # (b, Tq)
        hits.append(right[:, keep])
    stacked = [np.concatenate([s[i] for s in streams]) for i in range(len(streams[0]))]
    correct = torch.cat(hits)
    accuracy = float(correct.float().mean()) if correct.numel() else math.nan
    return Pass(stacked, (sums.sums / S).numpy(), np.log((sums.denominators / S).numpy()), accuracy, int(keep.sum()))


# ------------------------------------------------------------------------------------------------ probe


def probe_r2(streams: Sequence[np.ndarray]) -> np.ndarray:
    """Held-out R² of a ridge read of the position t from each layer's residual stream (S, T, C): fitted
    on the first half of the sequences, scored on the second (features standardised on the first)."""
    found = []
    for x in streams:
        S, T, C = x.shape
        half = S // 2
        y = np.tile(np.arange(T, dtype=np.float64), S)
        X = x.reshape(S * T, C).astype(np.float64)
        fit, score = slice(0, half * T), slice(half * T, S * T)
        mean, scale = X[fit].mean(0), np.maximum(X[fit].std(0), 1e-6)
        Xf, Xs = (X[fit] - mean) / scale, (X[score] - mean) / scale
        y_mean = y[fit].mean()
        w = np.linalg.solve(Xf.T @ Xf + RIDGE * Xf.shape[0] * np.eye(C), Xf.T @ (y[fit] - y_mean))
        residual = y[score] - (Xs @ w + y_mean)
        found.append(1.0 - float(residual @ residual) / float(((y[score] - y[score].mean()) ** 2).sum()))
    return np.array(found)


@dataclass(frozen=True)
class Probe:
    """The position probe's held-out R² per layer (0: the embeddings), trained and untrained."""

    r2: tuple[float, ...]
    baseline: tuple[tuple[float, ...], ...]  # per untrained seed, per layer
    seeds: tuple[int, ...]
    margin: float = PROBE_MARGIN

    @property
    def baseline_high(self) -> tuple[float, ...]:
        return tuple(float(v) for v in np.max(self.baseline, axis=0))

    @property
    def baseline_low(self) -> tuple[float, ...]:
        return tuple(float(v) for v in np.min(self.baseline, axis=0))

    @property
    def beats(self) -> tuple[bool, ...]:
        """Per layer after a block (1 … L): R² above the untrained seeds' largest by at least `margin`. The
        embeddings (layer 0) are a control, not part of the claim: a token's embedding has no position in it
        unless the encoding adds a table, trained or not."""
        return tuple(r > high + self.margin for r, high in zip(self.r2[1:], self.baseline_high[1:], strict=True))

    @property
    def gaps(self) -> tuple[float, ...]:
        """Per layer after a block: trained R² minus the untrained seeds' largest."""
        return tuple(r - high for r, high in zip(self.r2[1:], self.baseline_high[1:], strict=True))

    @property
    def best_layer(self) -> int:
        """The layer (1 … L) whose R² is furthest above (or least below) the untrained seeds' largest."""
        return 1 + int(np.argmax(self.gaps))


def probe_finding(probe: Probe) -> str:
    """What the probe shows for this run, in one sentence, from its own numbers (the claim: some layer
    after a block beats its untrained baseline by `margin`)."""
    best = probe.best_layer
    numbers = (f"layer {best}: R² {probe.r2[best]:.2f} against {probe.baseline_low[best]:.2f} to "
               f"{probe.baseline_high[best]:.2f} untrained, {len(probe.seeds)} seeds")
    if any(probe.beats):
        layers = ", ".join(str(i + 1) for i, beat in enumerate(probe.beats) if beat)
        return (f"the probe beats its untrained baseline by more than {probe.margin:g} after block(s) {layers} (best "
                f"{numbers}): training put readable absolute position into the residual stream.")
    if max(probe.gaps) < -probe.margin:
        return (f"the probe falls short of its untrained baseline at every layer (best {numbers}): the trained model "
                f"holds less linearly readable position than its initialisations. This contradicts "
                f"{claim_words(PROBE_CLAIM)}.")
    return (f"the probe does not beat its untrained baseline by {probe.margin:g} (best {numbers}): what a linear "
            f"read finds, the causal mask gives an untrained model too. This does not support "
            f"{claim_words(PROBE_CLAIM)}.")


def _with_seed(config: RunConfig, seed: int) -> RunConfig:
    return dataclasses.replace(config, train=dataclasses.replace(config.train, seed=seed))


def baseline_seeds(config: RunConfig, count: int = PROBE_BASELINE_SEEDS) -> tuple[int, ...]:
    """The untrained initialisations: the run's seed and the next ones (wrapping at 2^31)."""
    return tuple((config.train.seed + i) % (1 << 31) for i in range(count))


# ------------------------------------------------------------------------------------------ the report


@dataclass(frozen=True)
class Variant:
    """The run under one intervention, on the probe's sequences."""

    name: str
    accuracy: float | None  # None: not defined for this run (`reason`)
    r2: tuple[float, ...]
    sink: tuple[tuple[float, ...], ...]  # per layer, per head: mean weight on key 0 over queries t ≥ 1
    reason: str = ""


@dataclass(frozen=True)
class AbsolutePosition:
    length: int  # the probe's and the interventions' sequences
    samples: int
    probe: Probe
    variants: tuple[Variant, ...]
    sink_length: int  # the sink and the measured denominators: queries 0 … sink_length − 1
    sink: np.ndarray  # (layers, H, sink_length) mean weight on key 0
    uniform_sink: np.ndarray  # (sink_length,): 1 / (t + 1)
    log_denominator: np.ndarray | None  # (layers, H, sink_length): ln mean Z_t, measured (None: linear attention)
    exact_log_denominator: np.ndarray | None  # (H, sink_length): layer 0, exact from the weights (None: not RoPE)
    scored: int  # positions scored per sequence for accuracy


def _mean_sink(sink: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in head[1:].mean(-1)) for head in sink) if sink.shape[-1] > 1 else ()


def sink_length_of(config: RunConfig, multiple: int = SINK_MULTIPLE) -> int:
    """The sink's length: `multiple` × the training length, within a learned table's end."""
    length = multiple * config.task.train_length
    return min(length, config.model.max_positions) if config.model.encoding == "learned" else length


def _shift_reason(model: nn.Module, length: int) -> str:
    try:
        model.encoding.check_length(length + POSITION_SHIFT)
    except ValueError as error:
        return f"not defined for this run: {error}"
    return ""


@torch.no_grad()
def analyse_absolute_position(model: nn.Module, config: RunConfig, samples: int = PROBE_SAMPLES,
                              length: int | None = None, sink_multiple: int = SINK_MULTIPLE,
                              seeds: int = PROBE_BASELINE_SEEDS,
                              each: Callable[[], None] | None = None) -> AbsolutePosition:
    """The sink, the probe against its untrained baseline, the interventions and the denominators of a
    transformer run (module docstring); `each` is called after each model's passes (a progress bar)."""
    check_transformer(config)
    if samples < 4:
        raise ConfigError(f"samples {samples} is too few: the probe fits on half the sequences and scores on "
                          "the other half; choose at least 4")
    tick = each or (lambda: None)
    length = length or config.task.train_length
    check_lengths(config, model, [length])
    if length > MAX_PROBE_LENGTH:
        raise LengthError(f"probe length {length} is beyond {MAX_PROBE_LENGTH}, the limit for the position probe "
                          "(every layer's residual stream of every sequence is kept): choose a shorter one")
    device = next(model.parameters()).device
    tokens = sequence_tokens(PROBE_SEED, length, samples, config.task.vocab_size).to(device)
    trained = _pass(model, config, tokens, None)
    tick()
    untrained = []
    for seed in baseline_seeds(config, seeds):
        untrained.append(tuple(float(v) for v in probe_r2(_pass(initial_model(_with_seed(config, seed)).to(device).eval(),
                                                               config, tokens, None).streams)))
        tick()
    probe = Probe(tuple(float(v) for v in probe_r2(trained.streams)), tuple(untrained), baseline_seeds(config, seeds))
    variants = [Variant(VARIANTS[0], trained.accuracy, probe.r2, _mean_sink(trained.sink))]
    mean_embedding = model.embed.mean(0)
    replaced = _pass(model, config, tokens, mean_embedding)
    variants.append(Variant(VARIANTS[1], replaced.accuracy, tuple(float(v) for v in probe_r2(replaced.streams)),
                            _mean_sink(replaced.sink)))
    tick()
    reason = _shift_reason(model, length)
    if reason:
        variants.append(Variant(VARIANTS[2], None, (), (), reason))
    else:
        moved = _pass(shifted(model, POSITION_SHIFT), config, tokens, None)
        variants.append(Variant(VARIANTS[2], moved.accuracy, tuple(float(v) for v in probe_r2(moved.streams)),
                                _mean_sink(moved.sink)))
    tick()
    sink_length = sink_length_of(config, sink_multiple)
    sink_tokens = sequence_tokens(SINK_SEED, sink_length, max(4, samples // 4), config.task.vocab_size).to(device)
    read = _pass(model, config, sink_tokens, None)
    tick()
    softmax = has_denominator(config)
    return AbsolutePosition(
        length=length, samples=samples, probe=probe, variants=tuple(variants), sink_length=sink_length,
        sink=read.sink, uniform_sink=1.0 / np.arange(1, sink_length + 1),
        log_denominator=read.log_denominator if softmax else None,
        exact_log_denominator=exact_log_denominator(model, sink_length) if softmax and model.encoding.rotary else None,
        scored=trained.scored)


# ------------------------------------------------------------------------------- shipped with a preset


def _array(value) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float64)


def absolute_to_dict(found: AbsolutePosition) -> dict:
    """The analysis as plain JSON values (arrays as nested lists), for a preset to ship (scripts.build_presets)."""
    listed = lambda array: None if array is None else np.asarray(array).tolist()
    return {"length": found.length, "samples": found.samples, "scored": found.scored, "sink_length": found.sink_length,
            "probe": {"r2": list(found.probe.r2), "baseline": [list(b) for b in found.probe.baseline],
                      "seeds": list(found.probe.seeds), "margin": found.probe.margin},
            "variants": [{"name": v.name, "accuracy": v.accuracy, "r2": list(v.r2), "sink": [list(s) for s in v.sink],
                          "reason": v.reason} for v in found.variants],
            "sink": listed(found.sink), "uniform_sink": listed(found.uniform_sink),
            "log_denominator": listed(found.log_denominator),
            "exact_log_denominator": listed(found.exact_log_denominator)}


def absolute_from_dict(data: dict) -> AbsolutePosition:
    """`absolute_to_dict` read back: the same numbers (float64 arrays)."""
    probe = data["probe"]
    return AbsolutePosition(
        data["length"], data["samples"],
        Probe(tuple(probe["r2"]), tuple(tuple(b) for b in probe["baseline"]), tuple(probe["seeds"]), probe["margin"]),
        tuple(Variant(v["name"], v["accuracy"], tuple(v["r2"]), tuple(tuple(s) for s in v["sink"]), v["reason"])
              for v in data["variants"]),
        data["sink_length"], _array(data["sink"]), _array(data["uniform_sink"]), _array(data["log_denominator"]),
        _array(data["exact_log_denominator"]), data["scored"])

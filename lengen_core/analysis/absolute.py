"""Where absolute position comes from in a transformer whose logits see only relative offsets
(docs/science.md §3b, issue 30 §2).

Under RoPE every logit depends on t − u alone, yet a trained RoPE transformer can still tell
absolute positions apart. Two sources can supply them, and this module measures each one:

- **The sink.** Position 0 has no keys before it: its residual stream is a closed system, the same
  for every sequence that starts with the same token. A head that puts a position-dependent share
  of its weight on key 0 ("sink-reading") hands every later query a signal of where it is.
  `sink_attention`: each head's mean weight on key 0 as a function of the query position t,
  beside 1 / (t + 1), the share a uniform head gives it.
- **The mask.** A softmax query at t normalises over the t + 1 keys the causal mask lets it see,
  so its denominator Z_t = Σ_{u ≤ t} e^{logit(t, u)} grows with t even when every logit is relative.
  `mask_share`: ln E[Z_t] against t, exactly from the weights where the logits are per-token
  carriers s_ab(Δ) (the minimal RoPE head; layer 0 of a RoPE transformer, whose inputs are tokens
  alone), and measured from the logits of a forward pass (every head of every layer).

Whether the model *uses* absolute position is read with a **linear probe**: ridge regression from
each layer's residual stream (layer 0: the embeddings; layer l: after block l) to the query's
position t, fitted on half the sequences and scored by R² on the other half. Its baseline is the
same probe on untrained initialisations of the same config (`PROBE_BASELINE_SEEDS` seeds): the
causal mask alone already lets an untrained model average over a prefix whose length is the
position, so "the probe works" means "it beats that spread by `PROBE_MARGIN`".

**The interventions** (`intervene`): replace the first token's embedding by the mean embedding (the
sink's content goes, the mask stays), or shift every position by `POSITION_SHIFT` (under RoPE an
exact no-op up to float rounding: what changes is what the encoding made absolute). Each variant
reports accuracy, the probe and the sink weight.

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

from lengen_core.analysis.carrier import carrier_values, token_coefficients
from lengen_core.analysis.evaluate import LengthError, check_lengths, sequence_tokens
from lengen_core.analysis.sequence import tokens_per_batch
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
PROBE_SEED, SINK_SEED = 13, 17  # the evaluation sequences' seeds (lengen_core.analysis.evaluate.sequence_tokens)
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


class _SinkSums:
    """An observer summing, per layer, head and query position (layers, H, T): the weight on key 0,
    and the softmax denominator Z_t = Σ_{u ≤ t} e^{logit(t, u)} (float64, from each query's logsumexp)."""

    def __init__(self, layers: int, heads: int, length: int) -> None:
        self.sums = torch.zeros(layers, heads, length, dtype=torch.float64)
        self.denominators = torch.zeros(layers, heads, length, dtype=torch.float64)

    def __call__(self, layer: int, start: int, logits: torch.Tensor, weights: torch.Tensor) -> None:
        stop = start + weights.shape[2]
        self.sums[layer, :, start:stop] += weights[..., 0].sum(0).cpu().double()
        queries = torch.arange(start, stop, device=logits.device)
        hidden = torch.arange(logits.shape[-1], device=logits.device)[None, :] > queries[:, None]  # (q, T)
        log_z = logits.double().masked_fill(hidden, -math.inf).logsumexp(-1)  # (B, H, q)
        self.denominators[layer, :, start:stop] += log_z.exp().sum(0).cpu()


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
    sums = _SinkSums(model.n_layers, config.model.n_heads, T)
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
                "holds less linearly readable position than its initialisations. This contradicts the claim.")
    return (f"the probe does not beat its untrained baseline by {probe.margin:g} (best {numbers}): what a linear "
            "read finds, the causal mask gives an untrained model too. This does not support the claim.")


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


# ------------------------------------------------------------------------------------ the mask's share


@torch.no_grad()
def _head_coefficients(model: nn.Module) -> torch.Tensor:
    """c_abj = q_j(a)·conj(k_j(b))/√D per head, from the token inputs alone: (H, V, V, D/2) complex128.
    The minimal head's queries and keys are its tables; layer 0 of a transformer reads LN(E) (no
    position table under RoPE), so its logits are per-token carriers too."""
    if getattr(model, "blocks", None) is None:
        return token_coefficients(model)[None]
    block = model.blocks[0]
    C, H = model.embed.shape[1], block.n_heads
    q, k, _ = (block.norm_attention(model.embed) @ block.W_QKV).split(C, dim=-1)  # (V, C) each
    q, k = (t.reshape(-1, H, C // H).transpose(0, 1).cpu().double() for t in (q, k))  # (H, V, D)
    half = q.shape[-1] // 2
    qz, kz = torch.complex(q[..., :half], q[..., half:]), torch.complex(k[..., :half], k[..., half:])
    return qz[:, :, None, :] * kz.conj()[:, None, :, :] / math.sqrt(q.shape[-1])  # (H, V, V, D/2)


def exact_log_denominator(model: nn.Module, length: int) -> np.ndarray:
    """ln E[Z_t] for t = 0 … length − 1, per head of the minimal RoPE head or of layer 0 of a RoPE
    transformer: (H, length). With per-token carriers s_ab(Δ), a query of token a at t sees itself
    (Δ = 0) and t keys of iid uniform tokens, so

        E[Z_t] = (1/V) Σ_a [ e^{s_aa(0)} + Σ_{Δ=1}^{t} (1/V) Σ_b e^{s_ab(Δ)} ],

    which depends on t only through how many keys the causal mask shows the query: the mask's share
    of the position signal is all of it here. Exact (float64), no sampling."""
    if not model.encoding.rotary:
        raise ConfigError("the exact denominator needs per-token carriers, which RoPE has: this run's logits "
                          "are not a function of the tokens and t − u alone")
    coefficients = _head_coefficients(model)
    s = carrier_values(coefficients, model.encoding.frequencies.cpu(), torch.arange(length))  # (H, V, V, T)
    top = s.amax(dim=(1, 2, 3), keepdim=True)  # (H, 1, 1, 1): every exponent ≤ 0
    e = torch.exp(s - top)
    own = torch.diagonal(e[..., 0], dim1=1, dim2=2)  # (H, V): e^{s_aa(0)}
    others = e[..., 1:].mean(dim=2)  # (H, V, T-1): mean over key tokens b
    expected = torch.cat((own[..., None], own[..., None] + others.cumsum(-1)), dim=-1).mean(1)  # (H, T)
    return (expected.log() + top[:, 0, 0]).numpy()


@dataclass(frozen=True)
class MaskShare:
    """ln E[Z_t] for queries t = 0 … length − 1: exact from the weights per head (H, T) where the logits are
    per-token carriers (None elsewhere), and measured per layer and head (layers, H, T)."""

    length: int
    samples: int
    exact: np.ndarray | None
    measured: np.ndarray


def has_denominator(config: RunConfig) -> bool:
    """Whether the run's attention normalises (softmax): linear attention has no denominator to read."""
    return config.model.attention == "softmax"


def mask_share(model: nn.Module, config: RunConfig, length: int, samples: int = PROBE_SAMPLES) -> MaskShare:
    """The softmax denominators of any softmax run, the minimal head included (module docstring)."""
    if not has_denominator(config):
        raise ConfigError("the mask's share reads the softmax denominator; linear attention has none: choose a "
                          "softmax run")
    check_lengths(config, model, [length])
    exact = exact_log_denominator(model, length) if model.encoding.rotary else None
    return MaskShare(length, samples, exact, measured_log_denominator(model, config, length, samples))


@torch.no_grad()
def measured_log_denominator(model: nn.Module, config: RunConfig, length: int, samples: int,
                             seed: int = SINK_SEED) -> np.ndarray:
    """ln of the mean softmax denominator Z_t over `samples` random sequences, per layer and head, from
    the logits of forward passes: (layers, H, length) (the minimal head: one layer of one head)."""
    device = next(model.parameters()).device
    layers, heads = max(1, config.model.n_layers), 1 if config.model.minimal else config.model.n_heads
    sums = _SinkSums(layers, heads, length)
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(device)
    batch = max(1, tokens_per_batch(config) // length)
    for begin in range(0, samples, batch):
        model(tokens[begin : begin + batch], 0, observe=sums)
    return np.log((sums.denominators / samples).numpy())

"""Evaluation of the retrieval query at any length, in O(L) memory (docs/science.md §5).

Only the last query matters, so a sequence of length L costs one pass over its keys, chunk by
chunk, with an online softmax (running max, running sum) — never an L×L matrix. Within a chunk the
logit of the last query against a key depends only on (query token a, key token b, key position u),
so the model's per-token tables give all V×V×c logits at once and each sample just gathers its own;
when the vocabulary is large relative to the samples it gathers key vectors instead.

Tokens come from `sequence_tokens`, in fixed blocks with a seed per (seed, length, block), so a
sequence is the same whatever the chunk size and any slice of it can be regenerated on demand.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lengen_core.config import MAX_EVAL_LENGTH, MAX_EVAL_SAMPLES, MAX_SWEEP_LENGTHS, MAX_SWEEP_TOKENS, RunConfig
from lengen_core.encodings import LengthError

TOKEN_BLOCK = 4_096
CHUNK_ELEMENTS = 1 << 22  # elements of the largest per-chunk tensor (16 MB in float32)


def sequence_tokens(
    seed: int, length: int, samples: int, vocab_size: int, start: int = 0, stop: int | None = None
) -> torch.Tensor:
    """Tokens at positions start … stop-1 of the `samples` evaluation sequences of `length`: (S, stop-start)."""
    stop = length if stop is None else stop
    first, last = start // TOKEN_BLOCK, (stop - 1) // TOKEN_BLOCK
    blocks = []
    for block in range(first, last + 1):
        block_length = min(TOKEN_BLOCK, length - block * TOKEN_BLOCK)
        stream = torch.Generator().manual_seed(((seed * 1_000_003 + length) * 65_537 + block) % 2**63)
        blocks.append(torch.randint(vocab_size, (samples, block_length), generator=stream))
    tokens = torch.cat(blocks, dim=1)  # (S, covered)
    return tokens[:, start - first * TOKEN_BLOCK : stop - first * TOKEN_BLOCK]


def check_lengths(config: RunConfig, model: torch.nn.Module, lengths: Sequence[int]) -> None:
    """Every length must hold the answer (L > offset), stay within limits and the encoding's range."""
    for length in lengths:
        if isinstance(length, bool) or not isinstance(length, int):
            raise LengthError(f"length {length!r} must be a whole number")
        if length <= config.task.offset:
            raise LengthError(f"length {length} must be larger than the offset {config.task.offset}")
        if length > MAX_EVAL_LENGTH:
            raise LengthError(f"length {length} is beyond the evaluation limit of {MAX_EVAL_LENGTH} tokens")
        model.encoding.check_length(length)


def check_sweep(lengths: Sequence[int], samples: int = 1) -> None:
    """One request's size: at most `MAX_SWEEP_LENGTHS` lengths and `MAX_SWEEP_TOKENS` tokens in all."""
    if len(lengths) > MAX_SWEEP_LENGTHS:
        raise LengthError(f"{len(lengths)} lengths in one request; the limit is {MAX_SWEEP_LENGTHS}")
    tokens = samples * sum(lengths)
    if tokens > MAX_SWEEP_TOKENS:
        raise LengthError(
            f"{samples} samples at these lengths make {tokens:,} tokens in one request; the limit is "
            f"{MAX_SWEEP_TOKENS:,} (samples × the sum of the lengths): use fewer samples or shorter lengths"
        )


def check_sampling(samples: int, seed: int) -> None:
    """Sequences per length and the evaluation seed, within the limits."""
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_EVAL_SAMPLES:
        raise LengthError(f"samples {samples!r} is out of range: allowed 1 to {MAX_EVAL_SAMPLES}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise LengthError(f"evaluation seed {seed!r} is out of range: allowed 0 to {2**31 - 1}")


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


class SoftmaxAccumulator:
    """Online softmax over key chunks: rescale everything when the running max grows."""

    def __init__(self, samples: int, vocab_size: int, device: torch.device) -> None:
        self.max = torch.full((samples,), float("-inf"), device=device)
        self.total = torch.zeros(samples, device=device)
        self.votes = torch.zeros(samples, vocab_size, device=device)  # attention mass per key token
        self.positional = torch.zeros(samples, vocab_size, device=device)  # Σ w_u · RP[u]

    def add(self, logits: torch.Tensor, tokens: torch.Tensor, positional: torch.Tensor | None) -> None:
        new_max = torch.maximum(self.max, logits.max(dim=1).values)  # (S,)
        rescale = torch.exp(self.max - new_max)[:, None]  # (S, 1)
        weights = torch.exp(logits - new_max[:, None])  # (S, c)
        self.total = self.total * rescale[:, 0] + weights.sum(dim=1)
        self.votes = self.votes * rescale
        self.votes.scatter_add_(1, tokens, weights)
        self.positional = self.positional * rescale
        if positional is not None:
            self.positional += weights @ positional  # (S, c) @ (c, V)
        self.max = new_max

    def weights_of(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.exp(logits - self.max) / self.total

    def readout_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.votes / self.total[:, None], self.positional / self.total[:, None]


class LinearAccumulator:
    """No normalisation: the weights are the logits; target mass is |w_target| / Σ|w|."""

    def __init__(self, samples: int, vocab_size: int, device: torch.device) -> None:
        self.total = torch.zeros(samples, device=device)  # Σ |w|
        self.votes = torch.zeros(samples, vocab_size, device=device)
        self.positional = torch.zeros(samples, vocab_size, device=device)

    def add(self, logits: torch.Tensor, tokens: torch.Tensor, positional: torch.Tensor | None) -> None:
        self.total += logits.abs().sum(dim=1)
        self.votes.scatter_add_(1, tokens, logits)
        if positional is not None:
            self.positional += logits @ positional

    def weights_of(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.abs() / self.total

    def readout_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.votes, self.positional


ACCUMULATORS = {"softmax": SoftmaxAccumulator, "linear": LinearAccumulator}


@dataclass(frozen=True)
class QueryOutputs:
    """Per-sample results of the last query at one length."""

    readout: torch.Tensor  # (S, V) readout logits
    targets: torch.Tensor  # (S,) correct answers
    target_mass: torch.Tensor  # (S,)
    argmax_key: torch.Tensor  # (S,) position of the most attended key


def _chunk_logits(model, query: torch.Tensor, keys: torch.Tensor, query_tokens, tokens) -> torch.Tensor:
    """Logits of each sample's last query against its keys in one chunk: (S, c).

    query (V, C) and keys (V, c, C) hold every token; pick the cheaper of a V×V×c table then a
    gather, or a gather of each sample's key vectors then a dot product.
    """
    scale = 1.0 / math.sqrt(query.shape[-1])
    samples, vocab = tokens.shape[0], keys.shape[0]
    positions = torch.arange(tokens.shape[1], device=tokens.device)[None, :]
    if vocab * vocab <= samples:
        table = torch.einsum("ad,bcd->abc", query, keys) * scale  # (V, V, c)
        return table[query_tokens[:, None], tokens, positions]  # (S, c)
    sample_keys = keys[tokens, positions]  # (S, c, C)
    return torch.einsum("scd,sd->sc", sample_keys, query[query_tokens]) * scale


@torch.no_grad()
def last_query_outputs(
    model: torch.nn.Module, config: RunConfig, length: int, samples: int, seed: int, chunk: int | None = None
) -> QueryOutputs:
    device = model.embed.device
    V, offset, last = config.task.vocab_size, config.task.offset, length - 1
    tail = sequence_tokens(seed, length, samples, V, last - offset, length).to(device)  # (S, offset+1)
    query_tokens, targets = tail[:, -1], tail[:, 0]
    query = model.query_table(last)  # (V, C)
    query_position = torch.tensor([last], device=device)
    if chunk is None:
        chunk = max(TOKEN_BLOCK, CHUNK_ELEMENTS // max(samples, V * V, V * query.shape[-1]))
        chunk = chunk // TOKEN_BLOCK * TOKEN_BLOCK
    state = ACCUMULATORS[config.model.attention](samples, V, device)
    target_logit = torch.zeros(samples, device=device)
    best = torch.full((samples,), float("-inf"), device=device)
    best_key = torch.zeros(samples, dtype=torch.long, device=device)
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        positions = torch.arange(start, stop, device=device)
        tokens = sequence_tokens(seed, length, samples, V, start, stop).to(device)  # (S, c)
        logits = _chunk_logits(model, query, model.key_table(positions), query_tokens, tokens)
        bias = model.encoding.bias(query_position, positions)  # (1, 1, c) or None
        if bias is not None:
            logits = logits + bias[0]
        _, positional = model.readout_tables(positions)
        state.add(logits, tokens, positional)
        chunk_best, chunk_arg = logits.max(dim=1)
        better = chunk_best > best
        best = torch.where(better, chunk_best, best)
        best_key = torch.where(better, chunk_arg + start, best_key)
        if start <= last - offset < stop:
            target_logit = logits[:, last - offset - start]
    token_part, _ = model.readout_tables(positions[:1])
    votes, positional_sum = state.readout_weights()
    return QueryOutputs(
        readout=votes @ token_part + positional_sum,
        targets=targets,
        target_mass=state.weights_of(target_logit),
        argmax_key=best_key,
    )


@dataclass(frozen=True)
class LengthReport:
    length: int
    samples: int
    accuracy: float
    accuracy_low: float  # 95% Wilson interval
    accuracy_high: float
    target_mass: float  # mean attention weight on the key at the offset
    target_mass_sem: float  # its standard error over the samples
    argmax_key: int  # the most common argmax key of the query
    argmax_share: float  # fraction of samples whose argmax key is `argmax_key`
    seconds: float


def evaluate(
    model: torch.nn.Module,
    config: RunConfig,
    lengths: Sequence[int],
    samples: int = 256,
    seed: int = 12_345,
) -> list[LengthReport]:
    """Accuracy, target mass and argmax key of the last query at each length."""
    check_sampling(samples, seed)
    check_lengths(config, model, lengths)
    check_sweep(lengths, samples)
    reports = []
    for length in lengths:
        start = time.perf_counter()
        out = last_query_outputs(model, config, length, samples, seed)
        correct = int((out.readout.argmax(dim=1) == out.targets).sum())
        mode = int(out.argmax_key.mode().values)
        low, high = wilson_interval(correct, samples)
        reports.append(
            LengthReport(
                length=length,
                samples=samples,
                accuracy=correct / samples,
                accuracy_low=low,
                accuracy_high=high,
                target_mass=float(out.target_mass.mean()),
                target_mass_sem=float(out.target_mass.std() / math.sqrt(samples)) if samples > 1 else math.inf,
                argmax_key=mode,
                argmax_share=float((out.argmax_key == mode).float().mean()),
                seconds=time.perf_counter() - start,
            )
        )
    return reports

"""Evaluation of the retrieval query at any length, in memory bounded by design (docs/science.md §5).

Only the last query matters, so a sequence of length L costs one pass over its keys, chunk by
chunk, with an online softmax (running max, running sum) — never an L×L matrix. Within a chunk the
logit of the last query against a key depends only on (query token a, key token b, key position u),
so the model's per-token tables give all V×V×c logits by one matrix product and each sample gathers
its own (with fewer samples than tokens, the samples' own queries give an S×V×c table instead).

Memory. The chunk's tensors are products of the samples, the keys in the chunk and a width (the
key table V×c×d_model, the logit table V×V×c, the per-sample logits and indices S×c), so the chunk
sizes are chosen from the product of all three: `chunk_sizes` keeps the estimated chunk memory
(`chunk_bytes`) within `EVAL_MEMORY_BYTES`, for every V, d_model and sample count the limits allow.
Keys are cut first; when even `MIN_KEY_CHUNK` keys of every sample would not fit, the samples are
cut too, and each group of samples keeps its own accumulator (the results do not depend on the cut:
each sample's sums are its own). docs/evaluation-memory.md has the rule and the measurements.

Tokens come from `sequence_tokens`, in fixed blocks with a seed per (seed, length, block), so a
sequence is the same whatever the chunk sizes and any slice of it can be regenerated on demand.
Evaluation draws each block once on the CPU, in the narrowest integer type that holds the
vocabulary (one byte for V ≤ 256), and sends it to the device from pinned memory without waiting
where the device is CUDA; indices become int64 on the device, a chunk at a time. Each worker writes a
chunk's tensors into the same buffers every chunk (`_Workspace`), so the long loop allocates nothing of
a chunk's size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import torch

from lengen_core.analysis.rules import InferenceRule, under_rule
from lengen_core.config import MAX_EVAL_LENGTH, MAX_EVAL_SAMPLES, MAX_SWEEP_LENGTHS, MAX_SWEEP_TOKENS, RunConfig
from lengen_core.models.encodings import LengthError

TOKEN_BLOCK = 4_096
DOUBLINGS = 21  # a ladder's lengths by default: L … 2^20 L, every doubling up to MAX_EVAL_LENGTH and past it
EVAL_MEMORY_BYTES = 256 << 20  # the target: estimated memory of one chunk's tensors (`chunk_bytes`)
CHUNK_ELEMENTS = 1 << 18  # the largest per-chunk tensor stops growing here: 2 MB of int64 (1 024 keys at 256 samples)
MIN_KEY_CHUNK = 256  # fewer keys per chunk than this and the samples are cut instead
FLOAT = 4  # bytes
SAMPLE_KEY_BYTES = 32  # per sample and key: its token (narrow), its column and its cell (int64), its logit then weight


def doublings(start: int, count: int = DOUBLINGS, longest: int | None = None) -> tuple[int, ...]:
    """The length ladder every page, lesson and sweep measures on: start, 2·start, 4·start, … (`count`
    lengths), those up to `longest` where given. A caller keeps those its run allows (`check_lengths`) and its
    budget affords; lengen.first_visit.ladder is a run's ladder built on it."""
    return tuple(n for n in (start << p for p in range(count)) if longest is None or n <= longest)


def token_dtype(vocab_size: int) -> torch.dtype:
    """The narrowest integer type that holds every token (uint8 up to 256 tokens)."""
    if vocab_size <= 256:
        return torch.uint8
    return torch.int16 if vocab_size <= 2**15 else torch.int32


def token_block(seed: int, length: int, samples: int, vocab_size: int, block: int,
                dtype: torch.dtype = torch.long, out: torch.Tensor | None = None) -> torch.Tensor:
    """Block `block` (positions block·TOKEN_BLOCK …) of the `samples` evaluation sequences of `length`,
    drawn from its own CPU generator: (S, ≤ TOKEN_BLOCK), into `out` (a CPU tensor of that shape and `dtype`)
    where given. The values do not depend on `dtype`."""
    block_length = min(TOKEN_BLOCK, length - block * TOKEN_BLOCK)
    stream = torch.Generator().manual_seed(((seed * 1_000_003 + length) * 65_537 + block) % 2**63)
    return torch.randint(vocab_size, (samples, block_length), generator=stream, dtype=dtype, out=out)


def sequence_tokens(
    seed: int, length: int, samples: int, vocab_size: int, start: int = 0, stop: int | None = None,
    dtype: torch.dtype = torch.long,
) -> torch.Tensor:
    """Tokens at positions start … stop-1 of the `samples` evaluation sequences of `length`: (S, stop-start)."""
    stop = length if stop is None else stop
    first, last = start // TOKEN_BLOCK, (stop - 1) // TOKEN_BLOCK
    blocks = [token_block(seed, length, samples, vocab_size, block, dtype) for block in range(first, last + 1)]
    tokens = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=1)  # (S, covered)
    return tokens[:, start - first * TOKEN_BLOCK : stop - first * TOKEN_BLOCK]


def to_device(tokens: torch.Tensor, device: torch.device) -> torch.Tensor:
    """CPU tokens onto `device`: from pinned memory without waiting on CUDA, a plain copy elsewhere."""
    device = torch.device(device)
    if device.type == "cpu":
        return tokens
    if device.type == "cuda" and torch.cuda.is_available():
        return tokens.pin_memory().to(device, non_blocking=True)
    return tokens.to(device)


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None where the C library has none (macOS, musl, Windows)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


def resident_bytes() -> int | None:
    """This process's resident memory now, from /proc/self/statm (one small read); None without /proc."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class FreedMemory:
    """Gives freed CPU memory back to the system when the process has kept too much of it.

    glibc serves blocks below its mmap threshold from its heaps and raises that threshold to the
    largest block freed (up to 32 MB), so a chunk's tables of a few to 32 MB each land in the heaps,
    which fragment and keep their pages: measured, 290–390 MB of growth for a 102 MB chunk estimate
    (V 64, d_model 512, 64 samples, 8 192 to 131 072 tokens), growing with the length. After a chunk,
    `check` reads the resident memory and, when it has grown more than `allowance` since the start
    (the target less the next chunk's estimate: held pages plus a chunk stay near the target), calls
    malloc_trim, a few ms; the next chunk's pages are then faulted in again, so it is not done after
    every chunk (that cost the default evaluation 15–25% of its time). Nothing off the CPU, or where
    there is no /proc or no glibc."""

    def __init__(self, device: torch.device, allowance: int) -> None:
        active = torch.device(device).type == "cpu" and _malloc_trim() is not None
        self.start = resident_bytes() if active else None
        self.allowance = allowance

    def check(self) -> None:
        if self.start is None:
            return
        now = resident_bytes()
        if now is not None and now > self.start + self.allowance:
            _malloc_trim()(0)


class _Workspace:
    """One worker's buffers, reused from chunk to chunk: a chunk's tables, columns, logits and cells are
    written into the same memory each time instead of allocated anew. Each allocation of a chunk's size
    would otherwise go through the C library's allocator, which at a fixed mmap threshold (the served
    app's, lengen.runtime) maps and faults in the large ones anew and trims the heap under
    the small ones: under the app's threshold of the time (1 MB) 2^20 × 256 took 3.2–3.6 s with 1.4 million
    page faults before the buffers, 1.7–2.2 s with 47 thousand since (docs/evaluation-memory.md, "The buffers")."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.buffers = device, {}

    def __call__(self, name: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A contiguous (`shape`) tensor of `dtype`, the same memory as the last one of this name when it fits."""
        size = math.prod(shape)
        held = self.buffers.get(name)
        if held is None or held.numel() < size or held.dtype != dtype:
            held = self.buffers[name] = torch.empty(size, dtype=dtype, device=self.device)
        return held[:size].view(shape)


class _TokenStream:
    """The evaluation tokens of one length, read left to right a chunk at a time, key-major, as each
    sample's logit-table columns (token + `base`, the sample's query token's first column). Each block
    is drawn once on the CPU in `token_dtype`, sent to the device and transposed there, and stays narrow
    (S bytes a key for V ≤ 256); a chunk's columns are made int64 from it into the worker's `_Workspace`
    when the chunk is read."""

    def __init__(self, seed: int, length: int, samples: int, vocab_size: int, device: torch.device,
                 base: torch.Tensor | None = None, workspace: _Workspace | None = None) -> None:
        self.key = (seed, length, samples, vocab_size)
        self.dtype, self.device = token_dtype(vocab_size), torch.device(device)
        self.base = torch.zeros(samples, dtype=torch.long, device=device) if base is None else base  # (S,)
        self.workspace = _Workspace(device) if workspace is None else workspace
        self.blocks: dict[int, torch.Tensor] = {}  # (≤ TOKEN_BLOCK, S) narrow, key-major

    def keys(self, start: int, stop: int) -> torch.Tensor:
        """The columns at positions start … stop-1 of every sample, on the device: (stop-start, S), int64,
        in the workspace (the next call overwrites them)."""
        first, last = start // TOKEN_BLOCK, (stop - 1) // TOKEN_BLOCK
        self.blocks = {block: tokens for block, tokens in self.blocks.items() if block >= first}
        for block in range(first, last + 1):
            if block not in self.blocks:
                self.blocks[block] = self._draw(block, reuse=first == last)
        parts = [self.blocks[block] for block in range(first, last + 1)]
        tokens = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)  # (covered, S)
        chunk = tokens[start - first * TOKEN_BLOCK : stop - first * TOKEN_BLOCK]
        columns = self.workspace("columns", tuple(chunk.shape), torch.long)
        return columns.copy_(chunk).add_(self.base)  # widened, then `base` added in place (a mixed addition is slower)

    def _draw(self, block: int, reuse: bool) -> torch.Tensor:
        """Block `block`, key-major on the device: (≤ TOKEN_BLOCK, S). With `reuse` (a chunk within one block,
        as `_aligned` chunks are: no other block is held then), drawn and transposed into the workspace."""
        samples, keys = self.key[2], min(TOKEN_BLOCK, self.key[1] - block * TOKEN_BLOCK)
        if not reuse:
            drawn = to_device(token_block(*self.key, block, self.dtype), self.device)  # (S, ≤ TOKEN_BLOCK)
            return drawn.T.contiguous()
        on_cpu = self.workspace("drawn", (samples, keys), self.dtype) if self.device.type == "cpu" else None
        drawn = to_device(token_block(*self.key, block, self.dtype, out=on_cpu), self.device)
        return self.workspace("block", (keys, samples), self.dtype).copy_(drawn.T)

    def take(self, start: int, stop: int) -> torch.Tensor:
        """The tokens themselves, sample-major, as int64: (S, stop-start)."""
        return (self.keys(start, stop) - self.base).T


def chunk_bytes(vocab_size: int, d_model: int, samples: int, keys: int) -> int:
    """Estimated memory of one chunk of `keys` keys and `samples` samples: the logit table
    (min(V, samples)·V per key), the phases or position table and its product (2·C + V per key), and
    per sample and key SAMPLE_KEY_BYTES."""
    V, C = vocab_size, d_model
    per_key = FLOAT * (min(V, samples) * V + 2 * C + V) + SAMPLE_KEY_BYTES * samples
    return keys * per_key


def _aligned(keys: int) -> int:
    """`keys` rounded down to a power of two below TOKEN_BLOCK or a multiple of it above, so that no
    chunk spans two token blocks (no copy to join them)."""
    if keys >= TOKEN_BLOCK:
        return keys - keys % TOKEN_BLOCK
    return 1 << (keys.bit_length() - 1)


def chunk_sizes(vocab_size: int, d_model: int, samples: int, target: int | None = None) -> tuple[int, int]:
    """(samples per group, keys per chunk) whose `chunk_bytes` stays within `target` (EVAL_MEMORY_BYTES).

    Keys are cut first: as many as fit with every sample, at most enough for the largest tensor to
    reach CHUNK_ELEMENTS (larger chunks are slower: they leave the caches), at least MIN_KEY_CHUNK,
    and aligned to the token blocks (`_aligned`). When that many do not fit with every sample, the
    keys whose shared tables take half the target (at most MIN_KEY_CHUNK): if every sample fits with
    that many keys, as many keys as fit; if not, that many keys and the samples cut into groups that
    fit in the rest. Within 1 key and 1 sample nothing is cut further (the limits keep that far below
    any target of a few MB)."""
    target = EVAL_MEMORY_BYTES if target is None else target
    V, C = vocab_size, d_model
    fitting = target // chunk_bytes(V, C, samples, 1)
    preferred = max(MIN_KEY_CHUNK, CHUNK_ELEMENTS // max(samples, V * min(V, samples), C))
    if fitting >= MIN_KEY_CHUNK:
        return samples, _aligned(max(1, min(fitting, preferred)))
    shared = chunk_bytes(V, C, V, 1) - SAMPLE_KEY_BYTES * V  # per key, with the largest logit table
    keys = max(1, min(MIN_KEY_CHUNK, target // 2 // shared))
    if fitting >= keys:
        return samples, fitting
    group = (target // keys - shared) // SAMPLE_KEY_BYTES
    return max(1, min(samples, group)), keys


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
    """Online softmax over key chunks: rescale the sums when the running max grows."""

    def __init__(self, vocab_size: int, samples: int, device: torch.device) -> None:
        self.max = torch.full((samples,), float("-inf"), device=device)
        self.mass = torch.zeros(vocab_size, samples, device=device)  # attention mass per (key token, sample)
        self.positional = torch.zeros(samples, vocab_size, device=device)  # Σ w_u · RP[u]

    def add(self, logits: torch.Tensor, cells: torch.Tensor, chunk_max: torch.Tensor,
            positional: torch.Tensor | None) -> None:
        """logits (c, s), overwritten by their weights; cells (c, s) int64: each key's cell of the
        flattened (V, s) mass, token·s + sample (`_Group.add`)."""
        new_max = torch.maximum(self.max, chunk_max)  # (s,)
        if bool((new_max > self.max).any()):  # rarely after the first chunks: skip the (V, s) rescale
            rescale = torch.exp(self.max - new_max)  # (s,)
            self.mass *= rescale
            self.positional *= rescale[:, None]
        weights = logits.sub_(new_max).exp_()  # (c, s)
        self.mass.view(-1).index_add_(0, cells.view(-1), weights.view(-1))  # a scatter_add_, in half its time
        if positional is not None:
            self.positional.addmm_(weights.T, positional)  # (s, c) @ (c, V)
        self.max = new_max

    def merge(self, other: SoftmaxAccumulator) -> None:
        """Take in the sums of the same samples over other keys."""
        new_max = torch.maximum(self.max, other.max)
        mine, theirs = torch.exp(self.max - new_max), torch.exp(other.max - new_max)  # (s,) each
        self.mass = self.mass * mine + other.mass * theirs
        self.positional = self.positional * mine[:, None] + other.positional * theirs[:, None]
        self.max = new_max

    def total(self) -> torch.Tensor:
        return self.mass.sum(dim=0)  # (s,): every weight is in one column

    def weights_of(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.exp(logits - self.max) / self.total()

    def readout_weights(self, votes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total = self.total()[:, None]
        return votes / total, self.positional / total


class LinearAccumulator:
    """No normalisation: the weights are the logits; target mass is |w_target| / Σ|w|."""

    def __init__(self, vocab_size: int, samples: int, device: torch.device) -> None:
        self.absolute = torch.zeros(samples, device=device)  # Σ |w|
        self.mass = torch.zeros(vocab_size, samples, device=device)
        self.positional = torch.zeros(samples, vocab_size, device=device)

    def add(self, logits: torch.Tensor, cells: torch.Tensor, chunk_max: torch.Tensor,
            positional: torch.Tensor | None) -> None:
        self.absolute += logits.abs().sum(dim=0)
        self.mass.view(-1).index_add_(0, cells.view(-1), logits.view(-1))
        if positional is not None:
            self.positional.addmm_(logits.T, positional)

    def merge(self, other: LinearAccumulator) -> None:
        self.absolute += other.absolute
        self.mass += other.mass
        self.positional += other.positional

    def weights_of(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.abs() / self.absolute

    def readout_weights(self, votes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return votes, self.positional


ACCUMULATORS = {"softmax": SoftmaxAccumulator, "linear": LinearAccumulator}


@dataclass(frozen=True)
class QueryOutputs:
    """Per-sample results of the last query at one length."""

    readout: torch.Tensor  # (S, V) readout logits
    targets: torch.Tensor  # (S,) correct answers
    target_mass: torch.Tensor  # (S,)
    argmax_key: torch.Tensor  # (S,) position of the most attended key
    vote: torch.Tensor  # (S,) the ideal vote readout's answer: the token with the most attention weight


class _LogitTables:
    """The last query's logits against every (key token, key position) of a chunk, as a (c, n·V) table:
    entry [u, i·V + b] is the logit of the query token `present[i]` at the last position against token b
    at position u. The logit splits by what it depends on, so a chunk costs far less than a key table
    (V, c, C) and its product with the queries:

    - rotary (RoPE's half-split pairs; the query already rotated to its position t): with q = (q1, q2)
      and the key's unrotated k = (k1, k2) = E_b W_K, q·R_u k = Σ_j cos(ω_j u)·A_j + sin(ω_j u)·B_j with
      A = q1k1 + q2k2 and B = q2k1 − q1k2, a (C, n·V) table made once. For a chunk u = u0 + δ, the
      angle sums turn it into (cos ω δ | sin ω δ) @ [A cos ω u0 + B sin ω u0 ; B cos ω u0 − A sin ω u0]:
      the phases of δ < c are made once, those of u0 once a chunk (both by the encoding's own `rotate`,
      of the vector (1…1, 0…0), which it turns into (cos | sin)); c·C·n·V multiply-adds a chunk;
    - otherwise q·(E_b + P_u)W_K + bias_u = q·E_bW_K + (q W_Kᵀ)·P_u + bias_u: an (n, V) table made
      once, a (c, C) @ (C, n) product and the bias a chunk: c·C·n multiply-adds.

    An encoding that both adds a table and rotates would need the full key table; none does, and one
    is refused here rather than evaluated wrongly."""

    def __init__(self, model: torch.nn.Module, query: torch.Tensor, present: torch.Tensor, last: int,
                 factor: torch.Tensor | None) -> None:
        encoding, C, device = model.encoding, query.shape[1], query.device
        self.encoding, self.factor, self.n, self.V = encoding, factor, present.shape[0], model.embed.shape[0]
        self.query_position = torch.tensor([last], device=device)
        self.readout = model.W_V @ model.W_U  # (C, V): what a key's vector adds to the readout
        self.token_readout = model.embed @ self.readout  # (V, V)
        q, k = query[present], model.embed @ model.W_K  # (n, C), (V, C)
        if encoding.rotary and encoding.embed(self.query_position) is not None:
            raise NotImplementedError("the O(L) evaluation does not support an encoding that both adds a table "
                                      "and rotates")
        self.half = C // 2
        if encoding.rotary:
            q1, q2, k1, k2 = q[:, None, :self.half], q[:, None, self.half:], k[None, :, :self.half], k[None, :, self.half:]
            self.cos_part = (q1 * k1 + q2 * k2).reshape(-1, self.half).T.contiguous()  # A: (C/2, n·V)
            self.sin_part = (q2 * k1 - q1 * k2).reshape(-1, self.half).T.contiguous()  # B: (C/2, n·V)
            self.unit = torch.cat((torch.ones(self.half), torch.zeros(C - self.half))).to(device)
            self.steps: dict[int, torch.Tensor] = {}  # chunk length -> (c, C) phases of δ = 0 … c-1
        else:
            self.content = (q @ k.T).reshape(1, -1)  # (1, n·V)
            self.positional = (q @ model.W_K.T).T.contiguous()  # (C, n)

    def _phases(self, positions: torch.Tensor) -> torch.Tensor:
        """(cos | sin) of ω·p at each position: (c, C)."""
        return self.encoding.rotate(self.unit.expand(1, 1, positions.shape[0], -1), positions)[0, 0]

    def __call__(self, start: int, stop: int, workspace: _Workspace) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(c, n·V) logits at positions start … stop-1, bias included, in `workspace` (the caller's worker's:
        this object is shared between workers), and the encoding's (c, C) table there (or None)."""
        device, c = self.query_position.device, stop - start
        positions = torch.arange(start, stop, device=device)
        embedded = self.encoding.embed(positions)  # (c, C) or None
        if self.encoding.rotary:
            if c not in self.steps:
                self.steps[c] = self._phases(torch.arange(c, device=device))
            first = self._phases(positions[:1])[0]  # (C,): cos ω u0 | sin ω u0
            cos, sin = first[: self.half, None], first[self.half :, None]  # (C/2, 1) each
            turned = workspace("turned", (2 * self.half, self.cos_part.shape[1]))
            torch.add(self.cos_part * cos, self.sin_part * sin, out=turned[: self.half])
            torch.sub(self.sin_part * cos, self.cos_part * sin, out=turned[self.half :])
            table = torch.mm(self.steps[c], turned, out=workspace("table", (c, turned.shape[1])))  # (c, n·V)
        else:
            table = workspace("table", (c, self.n * self.V))
            if embedded is None:
                table.copy_(self.content.expand(c, -1))
            else:
                by_query = embedded @ self.positional  # (c, n)
                torch.add(by_query[:, :, None], self.content.view(1, self.n, self.V), out=table.view(c, self.n, self.V))
        bias = self.encoding.bias(self.query_position, positions)  # (1, 1, c) or None
        if bias is not None:
            bias = bias[0, 0] if self.factor is None else self.factor[0] * bias[0, 0]
            table.add_(bias[:, None])
        return table, embedded


class _Group:
    """The running results of one group of samples (rows `rows` of the evaluation) over some chunks:
    `base` is each sample's first column of the logit table (its query token's), + a key token its column;
    `lanes` + s·column is the sample's cell of the flattened (V, s) mass, token·s + sample."""

    def __init__(self, rows: slice, base: torch.Tensor, accumulator, V: int, device: torch.device) -> None:
        samples = rows.stop - rows.start
        self.rows, self.state = rows, accumulator(V, samples, device)
        self.lanes = torch.arange(samples, device=device) - samples * base  # (s,)
        self.target_logit = torch.zeros(samples, device=device)
        self.best = torch.full((samples,), float("-inf"), device=device)
        self.best_key = torch.zeros(samples, dtype=torch.long, device=device)

    def add(self, table: torch.Tensor, columns: torch.Tensor, start: int, target: int,
            positional: torch.Tensor | None, workspace: _Workspace) -> None:
        """One chunk: table (c, n·V), columns (c, s) key-major, int64: each key's column of the table.

        The chunk's best logits come from `amax` (a tenth of the time of `max` with its indices, measured);
        where a sample's best grows, which key holds it is looked up in that sample's column alone, the
        first such key as `max` gives it (a sample's best grows in a handful of its chunks)."""
        logits = torch.gather(table, 1, columns, out=workspace("logits", tuple(columns.shape)))  # (c, s): each key's column's logit
        chunk_best = logits.amax(dim=0)  # (s,)
        better = chunk_best > self.best
        if bool(better.any()):
            grown = better.nonzero()[:, 0]  # (g,)
            self.best_key[grown] = logits[:, grown].argmax(dim=0) + start
            self.best = torch.where(better, chunk_best, self.best)
        if start <= target < start + logits.shape[0]:
            self.target_logit = logits[target - start].clone()
        cells = torch.add(self.lanes, columns, alpha=self.lanes.shape[0],
                          out=workspace("cells", tuple(columns.shape), torch.long))  # (c, s): token·s + sample
        self.state.add(logits, cells, chunk_best, positional)

    def merge(self, later: _Group, target_in_later: bool) -> None:
        """Take in the same samples' results over later chunks (ties of the best logit: the earlier key)."""
        self.state.merge(later.state)
        better = later.best > self.best
        self.best = torch.where(better, later.best, self.best)
        self.best_key = torch.where(better, later.best_key, self.best_key)
        if target_in_later:
            self.target_logit = later.target_logit

    def votes(self) -> torch.Tensor:
        """(s, V): each sample's attention mass per key token."""
        return self.state.mass.T


Progress = Callable[[int, int], None]  # (done, total): a long analysis's hook; the core never prints
POLL_SECONDS = 0.1  # how often the calling thread passes the workers' progress on


def cpu_workers() -> int:
    """Threads a CPU evaluation shares its chunks between: the caller's torch threads, where torch runs
    them with OpenMP, whose thread count is per thread (each worker then runs its operations on one
    thread, and nothing else changes); else 1."""
    return max(1, torch.get_num_threads()) if "OpenMP" in torch.__config__.parallel_info() else 1


def _workers(device: torch.device, spans: int) -> int:
    """`cpu_workers` on the CPU, one elsewhere; never more than there are chunks."""
    return max(1, min(cpu_workers(), spans)) if torch.device(device).type == "cpu" else 1


class _Share:
    """One worker's chunks (`spans`, consecutive) and its own running results for every group."""

    def __init__(self, spans: list[tuple[int, int]], make_groups: Callable[[], list[_Group]],
                 workspace: _Workspace) -> None:
        self.spans, self.groups, self.keys, self.workspace = spans, make_groups(), 0, workspace

    def run(self, tables: _LogitTables, stream: _TokenStream, target: int, threads: int | None,
            freed: FreedMemory) -> None:
        """The chunks in turn; on a worker thread (`threads`: the caller's count) with one torch thread."""
        if threads is None:
            self._chunks(tables, stream, target, freed)
            return
        torch.set_num_threads(1)  # OpenMP's count for this thread; torch also keeps it as new threads' default,
        try:  # so it is put back as the caller had it
            with torch.no_grad():
                self._chunks(tables, stream, target, freed)
        finally:
            torch.set_num_threads(threads)

    def _chunks(self, tables: _LogitTables, stream: _TokenStream, target: int, freed: FreedMemory) -> None:
        for start, stop in self.spans:
            table, embedded = tables(start, stop, self.workspace)  # (c, columns), (c, C) or None
            positional = None if embedded is None else embedded @ tables.readout  # (c, V)
            columns = stream.keys(start, stop)  # (c, S) int64, key-major
            for group in self.groups:
                group.add(table, columns[:, group.rows], start, target, positional, self.workspace)
            del table, columns
            freed.check()
            self.keys += stop - start


@torch.no_grad()
def last_query_outputs(
    model: torch.nn.Module, config: RunConfig, length: int, samples: int, seed: int, chunk: int | None = None,
    sample_chunk: int | None = None, progress: Progress | None = None,
) -> QueryOutputs:
    """The last query's readout, target mass and argmax key for each of the `samples` sequences.

    `chunk` keys and `sample_chunk` samples at a time (default: `chunk_sizes`, within
    EVAL_MEMORY_BYTES); the results are the same for any chunking, to float rounding. On the CPU the
    chunks are shared between the caller's torch threads (`_workers`), each drawing its own tokens,
    and the shares' sums merged. `progress` hears (keys done, length), on the calling thread. Time:
    the logit tables (`_LogitTables`), S·L per-sample steps and drawing the S·L tokens."""
    device = model.embed.device
    V, offset, last = config.task.vocab_size, config.task.offset, length - 1
    group_size, chunk_size = chunk_sizes(V, config.model.d_model, samples)
    chunk = chunk_size if chunk is None else chunk
    group_size = group_size if sample_chunk is None else sample_chunk
    tail = to_device(sequence_tokens(seed, length, samples, V, last - offset, length, token_dtype(V)), device)
    tail = tail.long()  # (S, offset+1)
    query_tokens, targets = tail[:, -1], tail[:, 0]
    present, which = torch.unique(query_tokens, return_inverse=True)  # the query tokens there are; each sample's
    query = model.query_table(last) / math.sqrt(config.model.d_model)  # (V, C), scaled once
    factor = model.encoding.logit_scale(torch.tensor([last], device=device))  # a rule's (analysis.rules), or None
    if factor is not None:
        query = query * factor[0]
    tables = _LogitTables(model, query, present, last, factor)
    base = which * V  # (S,): each sample's first column of the logit table
    accumulator = ACCUMULATORS[config.model.attention]

    def make_groups() -> list[_Group]:
        return [_Group(slice(first, min(first + group_size, samples)), base[first : first + group_size],
                       accumulator, V, device) for first in range(0, samples, group_size)]

    spans = [(start, min(start + chunk, length)) for start in range(0, length, chunk)]
    count = _workers(device, len(spans))
    shares = [_Share(spans[w * len(spans) // count : (w + 1) * len(spans) // count], make_groups, _Workspace(device))
              for w in range(count)]
    estimate = chunk_bytes(V, config.model.d_model, min(group_size, samples), chunk) * count
    freed = FreedMemory(device, max(EVAL_MEMORY_BYTES // 4, EVAL_MEMORY_BYTES - estimate))
    streams = [_TokenStream(seed, length, samples, V, device, base, share.workspace) for share in shares]
    if count == 1:
        shares[0].run(tables, streams[0], last - offset, None, freed)
    else:
        with ThreadPoolExecutor(count, thread_name_prefix="lengen-evaluate") as pool:
            running = [pool.submit(share.run, tables, stream, last - offset, torch.get_num_threads(), freed)
                       for share, stream in zip(shares, streams, strict=True)]
            while wait(running, POLL_SECONDS)[1]:
                if progress is not None:
                    progress(sum(share.keys for share in shares), length)
            for future in running:
                future.result()  # a worker's error, raised here
    if progress is not None:
        progress(length, length)
    groups = shares[0].groups
    for share in shares[1:]:
        holds_target = any(start <= last - offset < stop for start, stop in share.spans)
        for group, later in zip(groups, share.groups, strict=True):
            group.merge(later, holds_target)
    readouts, masses, choices = [], [], []
    for group in groups:
        votes = group.votes()
        token_weights, positional_sum = group.state.readout_weights(votes)
        readouts.append(token_weights @ tables.token_readout + positional_sum)
        masses.append(group.state.weights_of(group.target_logit))
        choices.append(votes.argmax(dim=1))  # the attention-weighted token counts' largest: no readout at all
    return QueryOutputs(
        readout=torch.cat(readouts),
        targets=targets,
        target_mass=torch.cat(masses),
        argmax_key=torch.cat([group.best_key for group in groups]),
        vote=torch.cat(choices),
    )


def _shifted(progress: Progress, before: int, total: int, done: int, length: int) -> None:
    progress(before + done, total)


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
    rule: str = "none"  # the inference rule it was read under (lengen_core.analysis.rules), as links write it
    # The ideal vote readout on the same sequences and attention: the share of samples whose most attended
    # token (the attention-weighted token counts' argmax) is the target. None: not measured (numbers stored
    # before it was).
    vote_accuracy: float | None = None


def evaluate(
    model: torch.nn.Module,
    config: RunConfig,
    lengths: Sequence[int],
    samples: int = 256,
    seed: int = 12_345,
    rule: InferenceRule | None = None,
    progress: Progress | None = None,
) -> list[LengthReport]:
    """Accuracy, target mass and argmax key of the last query at each length, read under `rule`
    (lengen_core.analysis.rules; None: as trained), and the ideal vote readout's accuracy on the same
    sequences and attention weights (no pass beyond them: the weighted token counts are the accumulator's).
    `progress` hears (keys done, keys in all: the sum of the lengths) as the chunks are done."""
    check_sampling(samples, seed)
    check_lengths(config, model, lengths)
    check_sweep(lengths, samples)
    if rule is not None:
        rule.check(config)
    reports, total, before = [], sum(lengths), 0
    for length in lengths:
        start = time.perf_counter()
        heard = None if progress is None else functools.partial(_shifted, progress, before, total)
        out = last_query_outputs(under_rule(model, rule, length), config, length, samples, seed, progress=heard)
        before += length
        correct = int((out.readout.argmax(dim=1) == out.targets).sum())
        voted = int((out.vote == out.targets).sum())
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
                rule="none" if rule is None else rule.label,
                vote_accuracy=voted / samples,
            )
        )
    return reports

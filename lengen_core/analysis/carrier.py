"""The carrier kernel (docs/science.md §6): the positional rule a trained head has learned.

With RoPE, write each rotated pair (x_j, x_{j+D/2}) as z_j = x_j + i·x_{j+D/2}. For query token a
and key token b at offset Δ = t − u the logit is

    s_ab(Δ) = Σ_j Re[ q_j(a) · conj(k_j(b)) · e^{iω_jΔ} ] / √D = Σ_j Re[ c_abj · e^{iω_jΔ} ],

a function of Δ alone (C3), read straight from E, W_Q and W_K at any Δ, no forward pass. Its token
average s(Δ) = Σ_j A_j cos(ω_jΔ + φ_j) is the carrier; S_tu = s(t − u) has rank ≤ 2·(active
frequencies) (C5). Encodings without this closed form get a measured carrier: the expected logit at
each offset, from the expected logit matrix (`expected_logit_matrix`, exact, no sampled sequences).

The model may be on any device. What is computed from the weights alone (the coefficients, the
carrier, the near-recurrences) is taken to the CPU and computed there in float64; forward passes
run on the model's device and their sums come back to the CPU, summed in float64 where the device
has it (not on Apple's MPS: there in float32 first). The untrained baseline runs on the model's device.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.config import MAX_EVAL_LENGTH, MAX_SEED, RunConfig
from lengen_core.models.encodings import NO_FLOAT64, LengthError
from lengen_core.models.initial import initial_model
from lengen_core.thresholds import ACTIVE_AMPLITUDE

RANK_ENERGY = 0.99
MATRIX_BATCH_ELEMENTS = 1 << 24  # logits per batch when averaging the logit matrix (64 MB in float32)
BASELINE_SEEDS = 8  # untrained initialisations (the run's seed and the next 7) whose range is the baseline's interval
ALIGNMENT_MARGIN = 1.0  # nats: s(k) must beat every other offset in range by this to count as aligned
RECURRENCE_GAP = math.log(4.0)  # a far key within this of the target logit takes ≥ 1/4 its weight


@torch.no_grad()
def token_coefficients(model: torch.nn.Module) -> torch.Tensor:
    """c_abj = q_j(a)·conj(k_j(b))/√D for every query token a and key token b: (V, V, D/2) complex128,
    on the CPU whatever the model's device (MPS has no float64)."""
    q = model.query_table(0)  # (V, D); rotation at position 0 is the identity
    k = model.key_table(torch.zeros(1, dtype=torch.long, device=q.device))[:, 0]  # (V, D)
    q, k = q.cpu().double(), k.cpu().double()
    half = q.shape[-1] // 2
    qz = torch.complex(q[:, :half], q[:, half:])  # (V, D/2)
    kz = torch.complex(k[:, :half], k[:, half:])
    return qz[:, None, :] * kz.conj()[None, :, :] / math.sqrt(q.shape[-1])  # (V, V, D/2)


def carrier_values(coefficients: torch.Tensor, frequencies: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Re Σ_j c_j e^{iω_jΔ} for every leading index of `coefficients` (..., D/2) at `offsets` (n,)."""
    angles = offsets.to(torch.float64)[:, None] * frequencies.to(torch.float64)[None, :]  # (n, D/2)
    basis = torch.cat((torch.cos(angles), -torch.sin(angles)), dim=1)  # (n, D)
    stacked = torch.cat((coefficients.real, coefficients.imag), dim=-1)  # (..., D)
    return stacked @ basis.T  # (..., n)


class CarrierBlocks:
    """s_ab(Δ) − shift_a on blocks Δ = begin … end−1 (at most `span` long), float32, for long sweeps.

    s_ab(begin + δ) = Re Σ_j (c_abj·e^{iω_j·begin})·e^{iω_jδ}: the rotation by begin is taken in
    float64 on the (V, V, D/2) coefficients, so no float32 angle ever exceeds ω_j·span and the
    sweep needs no cos/sin per offset; the basis e^{iω_jδ}, δ < span, is computed once (float64,
    then rounded). One float32 GEMM per block: absolute error ≈ 1e-7 · Σ_j |c_abj|, at any Δ ≤ 2^20.
    """

    def __init__(self, coefficients: torch.Tensor, frequencies: torch.Tensor, span: int, shift: torch.Tensor | None):
        self.frequencies = frequencies.to(torch.float64)
        angles = torch.arange(span, dtype=torch.float64)[None, :] * self.frequencies[:, None]  # (D/2, span)
        ones = torch.ones(1, span, dtype=torch.float64)
        self.basis = torch.cat((torch.cos(angles), -torch.sin(angles), ones)).float()  # (D+1, span)
        self.shape = coefficients.shape[:-1]  # (V_a, V_b)
        self.coefficients = coefficients.reshape(-1, coefficients.shape[-1])  # (V·V, D/2) complex128
        if shift is None:
            shift = torch.zeros(self.shape[0], dtype=torch.float64)
        self.offset = -shift.to(torch.float64)[:, None].expand(self.shape).reshape(-1, 1)  # (V·V, 1)
        # |s_ab(Δ)| ≤ Σ_j |c_abj| at every Δ: no value returned exceeds this (up to float32 rounding)
        self.upper_bound = float((coefficients.abs().sum(-1).reshape(-1, 1) + self.offset).max())

    def __call__(self, begin: int, end: int) -> torch.Tensor:
        rotation = torch.polar(torch.ones_like(self.frequencies), self.frequencies * begin)  # (D/2,) e^{iω·begin}
        rotated = self.coefficients * rotation
        weights = torch.cat((rotated.real, rotated.imag, self.offset), dim=1).float()  # (V·V, D+1)
        return (weights @ self.basis[:, : end - begin]).view(*self.shape, end - begin)  # (V, V, c)


def token_carriers(model: torch.nn.Module, offsets: torch.Tensor) -> torch.Tensor:
    """s_ab(Δ) for a RoPE model: (V, V, n) float64."""
    return carrier_values(token_coefficients(model).cpu(), model.encoding.frequencies.cpu(), offsets.cpu())


@dataclass(frozen=True)
class NearRecurrence:
    offset: int  # Δ beyond the training range
    query_token: int
    key_token: int
    gap: float  # target logit minus the logit at this offset (smaller is worse)


@dataclass(frozen=True)
class CarrierMetrics:
    """What the carrier's numbers say, for one model (a trained run, or its untrained initialisation).

    - argmax_offset, margin: where s(Δ) peaks in the training range, and by how much it beats the
      next best offset there (nats);
    - aligned: the peak is at k AND the margin is at least `ALIGNMENT_MARGIN`: a peak at k by 0.02
      nats selects nothing;
    - effective_rank: singular values of the centred positional matrix keeping 99% of its energy;
    - toeplitz_fraction: energy of the centred expected logit matrix kept when each diagonal is
      replaced by its mean. It measures equivariance, not a learned rule: any RoPE, ALiBi or NoPE head,
      trained or not, is exactly 1 (its expected logit depends on t − u alone by construction). For
      an additive table (learned, sinusoidal) read it beside the untrained range (`BaselineRange`).
    """

    argmax_offset: int
    margin: float
    aligned: bool
    effective_rank: int
    active_frequencies: int
    toeplitz_fraction: float


@dataclass(frozen=True)
class BaselineRange:
    """Each metric's smallest and largest value over the untrained initialisations of one config
    (seeds `first_seed` … `first_seed` + seeds − 1, the run's own seed first). The metrics are exact
    for each initialisation, so the range is the spread over initialisations, not sampling noise."""

    seeds: int
    first_seed: int
    margin: tuple[float, float]
    effective_rank: tuple[int, int]
    active_frequencies: tuple[int, int]
    toeplitz_fraction: tuple[float, float]

    def contains(self, name: str, value: float) -> bool:
        low, high = getattr(self, name)
        return low <= value <= high


@dataclass(frozen=True)
class Carrier:
    source: str  # "analytic" (RoPE, from the weights) or "measured" (the expected logit matrix, also from the weights)
    offsets: np.ndarray  # Δ = 0 … n-1 (a learned table: only the offsets seen in training)
    values: np.ndarray  # s(Δ)
    frequencies: np.ndarray  # spectrum: ω_j (analytic) or FFT frequencies in rad/token (measured)
    amplitudes: np.ndarray  # A_j
    train_length: int
    offset: int
    singular_values: np.ndarray  # of the centred positional logit matrix
    metrics: CarrierMetrics  # of the trained model
    baseline: CarrierMetrics  # of the same config's untrained initialisation (same seed)
    near_recurrences: tuple[NearRecurrence, ...]
    baseline_range: BaselineRange | None = None  # over BASELINE_SEEDS initialisations (None: stored before it)

    # The trained model's metrics, by name (what the pages and the command line read).
    argmax_offset = property(lambda self: self.metrics.argmax_offset)
    margin = property(lambda self: self.metrics.margin)
    alignment = property(lambda self: self.metrics.aligned)
    effective_rank = property(lambda self: self.metrics.effective_rank)
    active_frequencies = property(lambda self: self.metrics.active_frequencies)
    toeplitz_fraction = property(lambda self: self.metrics.toeplitz_fraction)


def effective_rank(singular_values: np.ndarray, energy: float = RANK_ENERGY) -> int:
    power = np.cumsum(singular_values**2)
    if power[-1] <= 0:
        return 0
    return int(np.searchsorted(power / power[-1], energy - 1e-12) + 1)


def toeplitz_fraction(matrix: np.ndarray) -> float:
    """Share of the centred energy kept when each diagonal is replaced by its mean (1 = Toeplitz)."""
    centred = matrix - matrix.mean()
    n = matrix.shape[0]
    diagonal = (np.arange(n)[None, :] - np.arange(n)[:, None] + n - 1).ravel()  # column − row, shifted to 0 … 2n−2
    sums = np.bincount(diagonal, weights=centred.ravel(), minlength=2 * n - 1)
    counts = n - np.abs(np.arange(2 * n - 1) - (n - 1))  # entries on each diagonal
    kept = float((sums**2 / counts).sum())  # Σ over diagonals of (length × mean²)
    total = float((centred**2).sum())
    return 1.0 if total <= 1e-300 else min(1.0, kept / total)


@torch.no_grad()
def expected_logit_matrix(model: torch.nn.Module, length: int) -> np.ndarray:
    """The minimal head's raw (unmasked) attention logits at positions 0 … length-1, averaged over every
    sequence of independent uniform tokens, exactly: (T, T) float64 numpy, computed on the CPU.

    With x_t = E[a] + p_t (p the position table, 0 without one), q_t = R_t(x_t W_Q), k_u = R_u(x_u W_K)
    (R the rotation, the identity without RoPE) and A = W_Q W_Kᵀ/√D:
    - t ≠ u, independent tokens: E[q_t·k_u]/√D = R_t((ē + p_t) W_Q)·R_u((ē + p_u) W_K)/√D, ē the mean row of E;
    - t = u, the same token: R_t is a rotation, so q_t·k_t = x_t A x_tᵀ, averaged over the V tokens;
    plus the encoding's bias, all times an inference rule's logit scale where one is set. This is what
    `mean_logit_matrix` estimates from samples, without its noise."""
    E, W_Q, W_K = (w.detach().cpu().double() for w in (model.embed, model.W_Q, model.W_K))
    positions = torch.arange(length)
    on_device = positions.to(model.embed.device)  # a position table or bias lives on the model's device
    table = model.encoding.embed(on_device)
    table = torch.zeros(length, E.shape[1], dtype=torch.float64) if table is None else table.detach().cpu().double()
    scale = math.sqrt(W_Q.shape[1])
    mean = E.mean(dim=0) + table  # (T, C)
    q = model.encoding.rotate((mean @ W_Q)[None, None], positions)[0, 0]  # (T, D)
    k = model.encoding.rotate((mean @ W_K)[None, None], positions)[0, 0]
    matrix = q @ k.T / scale
    A = W_Q @ W_K.T / scale
    # mean over a of (E_a + p_t) A (E_a + p_t)ᵀ = mean_a E_a A E_aᵀ + ē A p_tᵀ + p_t A ēᵀ + p_t A p_tᵀ
    same = (E @ A * E).sum(dim=1).mean() + table @ A @ E.mean(dim=0) + E.mean(dim=0) @ A @ table.T + (table @ A * table).sum(dim=1)
    matrix[positions, positions] = same
    bias = model.encoding.bias(on_device, on_device)  # (H, T, T) or None
    if bias is not None:
        matrix = matrix + bias[0].detach().cpu().double()
    scale = model.encoding.logit_scale(on_device)  # (T,) an inference rule's factor per query, or None
    if scale is not None:
        matrix = matrix * scale.detach().cpu().double()[:, None]
    return matrix.numpy()


@torch.no_grad()
def mean_logit_matrix(model: torch.nn.Module, config: RunConfig, length: int, samples: int = 512, seed: int = 7):
    """Mean over random sequences of the raw (unmasked) attention logits: (T, T) numpy, first head.

    Sequences go through in batches of at most `MATRIX_BATCH_ELEMENTS` logits, so a long training
    length costs time, not memory."""
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(model.embed.device)
    batch = max(1, MATRIX_BATCH_ELEMENTS // (length * length))
    float64 = tokens.device.type not in NO_FLOAT64
    total = torch.zeros(length, length, dtype=torch.float64, device=tokens.device if float64 else "cpu")
    for begin in range(0, samples, batch):
        logits = model.attend(tokens[begin : begin + batch], 0)[0].logits[:, 0]  # (b, T, T)
        total += logits.double().sum(dim=0) if float64 else logits.sum(dim=0).cpu().double()
    return (total / samples).cpu().numpy()


RECURRENCE_LIMIT = 50  # near-recurrences listed at most (the first ones, by offset)
SEARCH_CHUNK = 1 << 14  # offsets the near-recurrence search takes at a time


def search_chunks(config: RunConfig, search_length: int) -> int:
    """The near-recurrence search's chunks of offsets, L_train … search_length − 1, when it runs to its end."""
    return -(-max(0, search_length - config.task.train_length) // SEARCH_CHUNK)


def find_near_recurrences(
    model: torch.nn.Module, config: RunConfig, search_length: int, gap: float = RECURRENCE_GAP,
    limit: int = RECURRENCE_LIMIT, each: Callable[[], None] | None = None,
) -> tuple[NearRecurrence, ...]:
    """Offsets past the training range where some s_ab(Δ) comes within `gap` of s_a(k), the query's
    mean target logit; the earliest `limit` of them, at most one per offset. `each` is called after each
    chunk of offsets searched (the search ends at the chunk where the `limit`-th is found)."""
    coefficients = token_coefficients(model).cpu()
    frequencies = model.encoding.frequencies.cpu()
    k, start = config.task.offset, config.task.train_length
    target = carrier_values(coefficients, frequencies, torch.tensor([k]))[..., 0].mean(dim=1)  # (V,)
    found: list[NearRecurrence] = []
    chunk = SEARCH_CHUNK
    for begin in range(start, search_length, chunk):
        offsets = torch.arange(begin, min(begin + chunk, search_length))
        values = carrier_values(coefficients, frequencies, offsets)  # (V, V, c)
        best, key_token = values.max(dim=1)  # (V, c)
        gaps = target[:, None] - best  # (V, c)
        closest, query_token = gaps.min(dim=0)  # (c,)
        for i in torch.nonzero(closest <= gap).flatten()[: limit - len(found)].tolist():
            a = int(query_token[i])
            found.append(NearRecurrence(int(offsets[i]), a, int(key_token[a, i]), float(closest[i])))
        if each is not None:
            each()
        if len(found) >= limit:
            break
    return tuple(found)


def _analytic_parts(model: torch.nn.Module, size: int):
    """RoPE: s(Δ) from the weights at Δ = 0 … size-1, S_tu = s(t − u) (size, size), the spectrum."""
    coefficients = token_coefficients(model).mean(dim=(0, 1)).cpu()  # (D/2,) complex
    frequencies = model.encoding.frequencies.cpu()
    full = carrier_values(coefficients, frequencies, torch.arange(-size + 1, size)).numpy()  # Δ = -size+1 … size-1
    positional = full[np.subtract.outer(np.arange(size), np.arange(size)) + size - 1]  # S_tu = s(t − u)
    return full[size - 1 :], positional, (frequencies.numpy(), coefficients.abs().numpy())


def _measured_parts(model: torch.nn.Module, size: int):
    """Other encodings: the expected logit at each offset, the expected logit matrix, its FFT spectrum."""
    positional = expected_logit_matrix(model, size)
    values = np.array([np.diagonal(positional, -d).mean() for d in range(size)])
    amplitudes = np.abs(np.fft.rfft(values - values.mean())) * 2 / size
    return values, positional, (2 * np.pi * np.fft.rfftfreq(size), amplitudes)


def _carrier_size(model: torch.nn.Module, config: RunConfig) -> int:
    """Offsets shown: 0 … 2·L_train (at least 128); a learned table only has the training range."""
    if getattr(model.encoding, "trained_positions", False):
        return config.task.train_length
    return max(128, 2 * config.task.train_length)


def _parts(model: torch.nn.Module, config: RunConfig):
    size = _carrier_size(model, config)
    if getattr(model.encoding, "rotary", False):
        return ("analytic", *_analytic_parts(model, size))
    return ("measured", *_measured_parts(model, size))


def _metrics(model, config: RunConfig, values: np.ndarray, positional: np.ndarray, amplitudes: np.ndarray):
    """CarrierMetrics and the singular values of the centred positional matrix."""
    L, k = config.task.train_length, config.task.offset
    in_range = values[:L]
    margin = float(in_range[k] - np.delete(in_range, k).max())
    argmax = int(np.argmax(in_range))
    singular = np.linalg.svd(positional - positional.mean(), compute_uv=False)
    toeplitz = toeplitz_fraction(expected_logit_matrix(model, L))
    peak = amplitudes.max()
    metrics = CarrierMetrics(
        argmax_offset=argmax, margin=margin, aligned=argmax == k and margin >= ALIGNMENT_MARGIN,
        effective_rank=effective_rank(singular),
        active_frequencies=int((amplitudes >= ACTIVE_AMPLITUDE * peak).sum()) if peak > 0 else 0,
        toeplitz_fraction=toeplitz,
    )
    return metrics, singular


def untrained_metrics(config: RunConfig) -> CarrierMetrics:
    """The metrics of `config`'s untrained initialisation (on the CPU: everything here is from the weights)."""
    untrained = initial_model(config).eval()
    _, values, positional, (_, amplitudes) = _parts(untrained, config)
    return _metrics(untrained, config, values, positional, amplitudes)[0]


def baseline_range(config: RunConfig, seeds: int = BASELINE_SEEDS,
                   each: Callable[[], None] | None = None) -> tuple[CarrierMetrics, BaselineRange]:
    """The run's own initialisation's metrics, and each metric's range over `seeds` initialisations of
    the config (its seed and the next ones; the largest seeds wrap to 0 …); `each` is called after each."""
    first = config.train.seed
    found = []
    for i in range(seeds):
        found.append(untrained_metrics(dataclasses.replace(config, train=dataclasses.replace(
            config.train, seed=(first + i) % (MAX_SEED + 1)))))
        if each is not None:
            each()

    def span(name: str):
        values = [getattr(m, name) for m in found]
        return min(values), max(values)

    return found[0], BaselineRange(seeds=seeds, first_seed=first, margin=span("margin"),
                                   effective_rank=span("effective_rank"),
                                   active_frequencies=span("active_frequencies"),
                                   toeplitz_fraction=span("toeplitz_fraction"))


@torch.no_grad()
def extract_carrier(model: torch.nn.Module, config: RunConfig, search_length: int = 1 << 20,
                    baseline_seeds: int = BASELINE_SEEDS,
                    progress: Callable[[int, int], None] | None = None) -> Carrier:
    """The carrier, its spectrum, rank, Toeplitz fraction and near-recurrences (analytic for RoPE),
    each metric beside the same metric of the config's untrained initialisation and its range over
    `baseline_seeds` initialisations (1: the run's own only, no range: a caller that reads no baseline,
    a sweep's cell, pays for one). Every number is computed from the weights, exactly. `progress` hears
    (parts done, parts): the run's own metrics, each initialisation's, and each chunk of the near-recurrence
    search's offsets (a search that ends early, at its last near-recurrence, jumps to the end)."""
    if isinstance(search_length, bool) or not isinstance(search_length, int) or not 1 <= search_length <= MAX_EVAL_LENGTH:
        raise LengthError(f"search length {search_length!r} is out of range: allowed 1 to {MAX_EVAL_LENGTH}")
    rotary = getattr(model.encoding, "rotary", False)
    parts, done = 1 + max(1, baseline_seeds) + (max(1, search_chunks(config, search_length)) if rotary else 0), [0]

    def advance() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], parts)

    source, values, positional, (frequencies, amplitudes) = _parts(model, config)
    metrics, singular = _metrics(model, config, values, positional, amplitudes)
    advance()
    if baseline_seeds > 1:
        baseline, spread = baseline_range(config, baseline_seeds, advance)
    else:
        baseline, spread = untrained_metrics(config), None
        advance()
    recurrences = find_near_recurrences(model, config, search_length, each=advance) if rotary else ()
    if done[0] < parts:  # a search that ended at its last near-recurrence (or had no offset to search)
        done[0] = parts - 1
        advance()
    return Carrier(
        source=source, offsets=np.arange(len(values)), values=values, frequencies=frequencies,
        amplitudes=amplitudes, train_length=config.task.train_length, offset=config.task.offset,
        singular_values=singular, metrics=metrics, baseline=baseline, baseline_range=spread,
        near_recurrences=recurrences,
    )

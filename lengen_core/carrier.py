"""The carrier kernel (SCIENCE.md §5): the positional rule a trained head has learned.

With RoPE, write each rotated pair (x_j, x_{j+D/2}) as z_j = x_j + i·x_{j+D/2}. For query token a
and key token b at offset Δ = t − u the logit is

    s_ab(Δ) = Σ_j Re[ q_j(a) · conj(k_j(b)) · e^{iω_jΔ} ] / √D = Σ_j Re[ c_abj · e^{iω_jΔ} ],

a function of Δ alone (C3), read straight from E, W_Q and W_K at any Δ, no forward pass. Its token
average s(Δ) = Σ_j A_j cos(ω_jΔ + φ_j) is the carrier; S_tu = s(t − u) has rank ≤ 2·(active
frequencies) (C5). Encodings without this closed form get a carrier measured from recorded logits:
the mean logit at each offset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.config import MAX_EVAL_LENGTH, RunConfig
from lengen_core.encodings import LengthError
from lengen_core.evaluate import sequence_tokens

RANK_ENERGY = 0.99
ACTIVE_AMPLITUDE = 0.01  # a frequency is active when its amplitude is ≥ 1% of the largest
TOEPLITZ_SAMPLES = 4_096  # the mean logit matrix at the training length: sampling noise ≈ 1/64
RECURRENCE_GAP = math.log(4.0)  # a far key within this of the target logit takes ≥ 1/4 its weight


@torch.no_grad()
def token_coefficients(model: torch.nn.Module) -> torch.Tensor:
    """c_abj = q_j(a)·conj(k_j(b))/√D for every query token a and key token b: (V, V, D/2) complex128."""
    q = model.query_table(0).double()  # (V, D); rotation at position 0 is the identity
    k = model.key_table(torch.zeros(1, dtype=torch.long, device=q.device))[:, 0].double()  # (V, D)
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
class Carrier:
    source: str  # "analytic" (RoPE, from the weights) or "measured" (mean recorded logits)
    offsets: np.ndarray  # Δ = 0 … n-1
    values: np.ndarray  # s(Δ)
    frequencies: np.ndarray  # spectrum: ω_j (analytic) or FFT frequencies in rad/token (measured)
    amplitudes: np.ndarray  # A_j
    train_length: int
    offset: int
    argmax_offset: int  # argmax of s over the training range
    margin: float  # s(k) − max over the other offsets of the training range
    singular_values: np.ndarray  # of the positional logit matrix
    effective_rank: int  # singular values keeping ≥ 99% of the energy
    active_frequencies: int
    toeplitz_fraction: float
    near_recurrences: tuple[NearRecurrence, ...]

    @property
    def alignment(self) -> bool:
        return self.argmax_offset == self.offset


def effective_rank(singular_values: np.ndarray, energy: float = RANK_ENERGY) -> int:
    power = np.cumsum(singular_values**2)
    if power[-1] <= 0:
        return 0
    return int(np.searchsorted(power / power[-1], energy - 1e-12) + 1)


def toeplitz_fraction(matrix: np.ndarray) -> float:
    """Share of the centred energy kept when each diagonal is replaced by its mean (1 = Toeplitz)."""
    centred = matrix - matrix.mean()
    n = matrix.shape[0]
    toeplitz = np.zeros_like(centred)
    for d in range(-n + 1, n):
        diagonal = np.diagonal(centred, d)
        idx = np.arange(len(diagonal))
        rows, cols = (idx - min(d, 0), idx + max(d, 0))
        toeplitz[rows, cols] = diagonal.mean()
    total = float((centred**2).sum())
    return 1.0 if total == 0 else float((toeplitz**2).sum()) / total


@torch.no_grad()
def mean_logit_matrix(model: torch.nn.Module, config: RunConfig, length: int, samples: int = 512, seed: int = 7):
    """Mean over random sequences of the raw (unmasked) attention logits: (T, T) numpy, first head."""
    tokens = sequence_tokens(seed, length, samples, config.task.vocab_size).to(model.embed.device)
    logits = model.attend(tokens, 0)[0].logits[:, 0]  # (S, T, T)
    return logits.mean(dim=0).double().cpu().numpy()


def find_near_recurrences(
    model: torch.nn.Module, config: RunConfig, search_length: int, gap: float = RECURRENCE_GAP, limit: int = 50
) -> tuple[NearRecurrence, ...]:
    """Offsets past the training range where some s_ab(Δ) comes within `gap` of s_a(k), the query's
    mean target logit; the earliest `limit` of them, at most one per offset."""
    coefficients = token_coefficients(model).cpu()
    frequencies = model.encoding.frequencies.cpu()
    k, start = config.task.offset, config.task.train_length
    target = carrier_values(coefficients, frequencies, torch.tensor([k]))[..., 0].mean(dim=1)  # (V,)
    found: list[NearRecurrence] = []
    chunk = 1 << 14
    for begin in range(start, search_length, chunk):
        offsets = torch.arange(begin, min(begin + chunk, search_length))
        values = carrier_values(coefficients, frequencies, offsets)  # (V, V, c)
        best, key_token = values.max(dim=1)  # (V, c)
        gaps = target[:, None] - best  # (V, c)
        closest, query_token = gaps.min(dim=0)  # (c,)
        for i in torch.nonzero(closest <= gap).flatten()[: limit - len(found)].tolist():
            a = int(query_token[i])
            found.append(NearRecurrence(int(offsets[i]), a, int(key_token[a, i]), float(closest[i])))
        if len(found) >= limit:
            break
    return tuple(found)


@torch.no_grad()
def extract_carrier(
    model: torch.nn.Module, config: RunConfig, search_length: int = 1 << 20, samples: int = 512
) -> Carrier:
    """The carrier, its spectrum, rank, Toeplitz fraction and near-recurrences (analytic for RoPE)."""
    if isinstance(search_length, bool) or not isinstance(search_length, int) or not 1 <= search_length <= MAX_EVAL_LENGTH:
        raise LengthError(f"search length {search_length!r} is out of range: allowed 1 to {MAX_EVAL_LENGTH}")
    L, k = config.task.train_length, config.task.offset
    size = max(128, 2 * L)
    if getattr(model.encoding, "rotary", False):
        coefficients = token_coefficients(model).mean(dim=(0, 1)).cpu()  # (D/2,) complex
        frequencies = model.encoding.frequencies.cpu()
        offsets = torch.arange(-size + 1, size)
        full = carrier_values(coefficients, frequencies, offsets).numpy()  # s(Δ), Δ = -size+1 … size-1
        index = np.subtract.outer(np.arange(size), np.arange(size)) + size - 1
        positional = full[index]  # S_tu = s(t - u)
        values = full[size - 1 :]
        spectrum = (frequencies.numpy(), coefficients.abs().numpy())
        recurrences = find_near_recurrences(model, config, search_length)
        source = "analytic"
    else:
        size = min(size, getattr(model.encoding, "table", torch.empty(size)).shape[0])
        positional = mean_logit_matrix(model, config, size, samples)
        values = np.array([np.diagonal(positional, -d).mean() for d in range(size)])
        amplitudes = np.abs(np.fft.rfft(values - values.mean())) * 2 / size
        spectrum = (2 * np.pi * np.fft.rfftfreq(size), amplitudes)
        recurrences = ()
        source = "measured"
    in_range = values[:L]
    singular = np.linalg.svd(positional, compute_uv=False)
    others = np.delete(in_range, k)
    return Carrier(
        source=source,
        offsets=np.arange(len(values)),
        values=values,
        frequencies=spectrum[0],
        amplitudes=spectrum[1],
        train_length=L,
        offset=k,
        argmax_offset=int(np.argmax(in_range)),
        margin=float(in_range[k] - others.max()),
        singular_values=singular,
        effective_rank=effective_rank(singular),
        active_frequencies=int((spectrum[1] >= ACTIVE_AMPLITUDE * spectrum[1].max()).sum()),
        toeplitz_fraction=toeplitz_fraction(mean_logit_matrix(model, config, L, TOEPLITZ_SAMPLES)),
        near_recurrences=recurrences,
    )

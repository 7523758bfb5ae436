"""Positional encodings as small strategy classes (docs/science.md §3).

Each encoding offers the three hooks attention needs, and attention never asks for its name:

- `embed(positions)`: a (T, d_model) table added to the token embeddings, or None;
- `rotate(x, positions)`: x (B, H, T, D) with positions applied by rotation (identity if none);
- `bias(query_positions, key_positions)`: (H, Tq, Tk) added to the attention logits, or None.

Positions are absolute indices 0 … L-1 as int64 tensors. RoPE angles are computed in float64:
at positions near 10^6 float32 angles lose about 0.06 rad and the relative-position property
(the logit depends on t − u alone) would no longer hold to test precision. A device without
float64 (Apple's MPS) gets its angles formed in float64 on the CPU and reduced modulo 2π there, so
the float32 angles it receives are below 2π and keep about 1e-7 rad (`reduced_angles`); the
frequencies stay a float64 CPU tensor, not a buffer, so moving a model to such a device never
tries to move a float64 tensor there.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from lengen_core.config import ModelConfig
from lengen_core.frequencies import rope_frequencies


class LengthError(ValueError):
    """A length the model cannot be evaluated at; the message says what is allowed."""


class PositionalEncoding(nn.Module):
    additive = False  # adds a table to the embeddings
    rotary = False  # rotates queries and keys
    relative = True  # logits depend on token pairs and t − u alone
    trained_positions = False  # positions are parameters: beyond the training range they are untrained
    single_head_limit: str | None = None  # why one head with this encoding cannot select offset k

    def embed(self, positions: torch.Tensor) -> torch.Tensor | None:
        return None

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor | None:
        return None

    def check_length(self, length: int) -> None:
        """Raise `LengthError` if positions 0 … length-1 are outside what this encoding defines."""

    def logit_scale(self, query_positions: torch.Tensor) -> torch.Tensor | None:
        """A factor (Tq,) multiplying each query's logits, bias included, or None: an inference rule's
        (lengen_core.analysis.rules); an encoding on its own scales nothing."""
        return None


class NoPE(PositionalEncoding):
    """Nothing but the causal mask."""

    single_head_limit = (
        "Without positions one head sees which tokens are there, not where: every key of the same token gets "
        "the same logit, so no logit can single out the key k places back. A RoPE head can (the presets); "
        "a transformer of several layers can count positions through the causal mask (Transformer page)."
    )


NO_FLOAT64 = frozenset({"mps"})  # device types without float64


def reduced_angles(positions: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """ω_j·p modulo 2π, formed in float64 on the CPU, as float32 on the positions' device: (T, F)."""
    angles = positions.cpu().to(torch.float64)[:, None] * frequencies.cpu().to(torch.float64)[None, :]
    return torch.remainder(angles, 2 * math.pi).to(torch.float32).to(positions.device)


def _angles(positions: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """ω_j·p in float64 on the positions' device, or reduced to float32 where the device has no float64."""
    if positions.device.type in NO_FLOAT64:
        return reduced_angles(positions, frequencies)
    return positions.to(torch.float64)[:, None] * frequencies.to(positions.device, torch.float64)[None, :]


def rope_rotate(x: torch.Tensor, positions: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x_j, x_{j+D/2}) by ω_j·position; the half-split convention.

    As complex numbers z_j = x_j + i·x_{j+D/2}, the rotation is z_j·e^{iω_j p}, so for a query at t
    and a key at u, Re(q·conj(k)) picks up e^{iω_j (t-u)}: the logit depends on t − u alone.
    """
    angles = _angles(positions, frequencies)  # (T, D/2)
    cos = torch.cos(angles).to(x.dtype)
    sin = torch.sin(angles).to(x.dtype)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (..., T, D/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, D)


class RoPE(PositionalEncoding):
    rotary = True

    def __init__(self, d_head: int, base: float) -> None:
        super().__init__()
        self.frequencies = rope_frequencies(d_head, base)  # float64 on the CPU, never moved (module docstring)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return rope_rotate(x, positions, self.frequencies)


class Learned(PositionalEncoding):
    """A trainable table; rows never reached in training keep their initial values (C4).

    Initialised small (std 0.02, as GPT-2 does), so an untrained row is close to "no position".
    """

    additive = True
    relative = False
    trained_positions = True
    init_std = 0.02

    def __init__(self, max_positions: int, d_model: int, generator: torch.Generator) -> None:
        super().__init__()
        table = torch.randn(max_positions, d_model, generator=generator) * self.init_std
        self.table = nn.Parameter(table)

    def check_length(self, length: int) -> None:
        limit = self.table.shape[0]
        if length > limit:
            raise LengthError(
                f"length {length} is beyond the learned position table, which covers lengths up to "
                f"{limit} (positions 0–{limit - 1}); choose a length ≤ {limit}"
            )

    def embed(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table[positions]


def sinusoidal_table(positions: torch.Tensor, d_model: int, base: float = 10_000.0) -> torch.Tensor:
    frequencies = base ** (-torch.arange(0, d_model // 2, dtype=torch.float64) * 2.0 / d_model)
    angles = _angles(positions, frequencies)
    return torch.cat((torch.sin(angles), torch.cos(angles)), dim=-1).float()  # (T, d)


class Sinusoidal(PositionalEncoding):
    """The fixed absolute sin/cos table of Vaswani et al., added to the embeddings."""

    additive = True
    relative = False

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model

    def embed(self, positions: torch.Tensor) -> torch.Tensor:
        return sinusoidal_table(positions, self.d_model)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Geometric slopes of Press et al. (2022), including their rule for non-powers of two."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = power_of_two(n_heads)
    else:
        closest = 2 ** math.floor(math.log2(n_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(PositionalEncoding):
    single_head_limit = (
        "One ALiBi head adds a single bias −m·(t − u) that falls with distance, and the tokens are random, so "
        "its largest logit on average is at offset 0, never at k > 0. A RoPE head can select offset k (the "
        "presets); so can a transformer whose heads combine slopes (Transformer page)."
    )

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        distance = (query_positions[:, None] - key_positions[None, :]).to(torch.float32)  # (Tq, Tk)
        return -self.slopes[:, None, None] * distance  # (H, Tq, Tk)


# The registry: encoding name -> builder. Attention code only ever sees the hooks above. Adding an encoding is
# its class, its line here and in ENCODING_CLASSES, its name in lengen_core.config.EncodingName and its record
# (name, display name, colour, dash, claims) in lengen_core.claims.ENCODING_RECORDS: tests/unit/
# test_encoding_records.py holds the four to the same names.
ENCODINGS: dict[str, Callable[[ModelConfig, torch.Generator], PositionalEncoding]] = {
    "rope": lambda config, generator: RoPE(config.d_model // config.n_heads, config.rope_base),
    "learned": lambda config, generator: Learned(config.max_positions, config.d_model, generator),
    "sinusoidal": lambda config, generator: Sinusoidal(config.d_model),
    "alibi": lambda config, generator: ALiBi(config.n_heads),
    "nope": lambda config, generator: NoPE(),
}

# Each name's class, whose flags (relative, rotary, additive, trained_positions) say what it is without a model.
ENCODING_CLASSES: dict[str, type[PositionalEncoding]] = {
    "rope": RoPE, "learned": Learned, "sinusoidal": Sinusoidal, "alibi": ALiBi, "nope": NoPE,
}


def build_encoding(config: ModelConfig, generator: torch.Generator) -> PositionalEncoding:
    return ENCODINGS[config.encoding](config, generator)

"""The rules that change the carrier (lengen_core.analysis.rules): Position Interpolation on the positions, and
RoPE's frequencies under NTK, dynamic NTK, NTK-by-parts (YaRN's frequencies) and a LongRoPE table.
tests/unit/test_rules_oracle.py holds the frequencies against the transformers library's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from lengen_core.analysis.rules.base import MAX_RULE_SCALE, InferenceRule, RuleError
from lengen_core.config import RunConfig

CONTINUOUS_POSITIONS = ("rope", "sinusoidal", "alibi")


@dataclass(frozen=True)
class PositionInterpolation(InferenceRule):
    """Changes the carrier: positions × 1/s, s = L / L_train. RoPE, sinusoidal and ALiBi."""

    name: ClassVar[str] = "pi"
    changes: ClassVar[str] = "carrier"
    param_name: ClassVar[str | None] = "scale s"
    summary: ClassVar[str] = "positions × L_train / L"

    def identity_at(self, length: int, train_length: int) -> bool:
        return self._scale_is_one(length, train_length)

    def check(self, config: RunConfig) -> None:
        encoding = config.model.encoding
        if encoding not in CONTINUOUS_POSITIONS:
            why = ("a learned table has rows at whole positions only: there is no row between two to interpolate to"
                   if encoding == "learned" else "NoPE has no positions to interpolate")
            raise RuleError(f"pi is not defined for {encoding}: {why}; it is defined for "
                            f"{', '.join(CONTINUOUS_POSITIONS)}")

    def position_factor(self, length: int, train_length: int) -> float:
        return 1.0 / self.scale(length, train_length)


def _rope_only(rule: InferenceRule, config: RunConfig, what: str, exponent: bool = False) -> None:
    if config.model.encoding != "rope":
        raise RuleError(f"{rule.name} {what} and is not defined for {config.model.encoding}; it is defined for rope")
    if exponent and config.model.d_model // config.model.n_heads <= 2:
        raise RuleError(f"{rule.name} needs a head width above 2 (its exponent is D/(D−2)); this run's heads are "
                        "2 wide")


@dataclass(frozen=True)
class NTKScaling(InferenceRule):
    """Changes the carrier: RoPE's base × α^{D/(D−2)}, α = L / L_train. RoPE only."""

    name: ClassVar[str] = "ntk"
    changes: ClassVar[str] = "carrier"
    param_name: ClassVar[str | None] = "scale α"
    summary: ClassVar[str] = "RoPE base × α^(D/(D−2)), α = L / L_train"

    def identity_at(self, length: int, train_length: int) -> bool:
        return self._scale_is_one(length, train_length)

    def check(self, config: RunConfig) -> None:
        _rope_only(self, config, "rescales RoPE's base", exponent=True)

    def setting_at(self, length: int, train_length: int) -> str:
        return f"α = {self.scale(length, train_length):g}"

    def rope_base(self, base: float, d_head: int, length: int, train_length: int) -> float:
        return base * self.scale(length, train_length) ** (d_head / (d_head - 2))


@dataclass(frozen=True)
class DynamicNTK(InferenceRule):
    """Changes the carrier: RoPE's base × α^{D/(D−2)} with α = f·L/L_train − (f − 1) beyond L_train, the
    transformers library's `dynamic` rope type at its current length L. RoPE only."""

    name: ClassVar[str] = "dynamic"
    changes: ClassVar[str] = "carrier"
    param_name: ClassVar[str | None] = "factor f"
    summary: ClassVar[str] = "dynamic NTK: RoPE base × α^(D/(D−2)), α = f·L/L_train − (f − 1), f = 2"
    default_factor: ClassVar[float] = 2.0

    def identity_at(self, length: int, train_length: int) -> bool:
        return length <= train_length

    def check(self, config: RunConfig) -> None:
        _rope_only(self, config, "rescales RoPE's base", exponent=True)

    def scale(self, length: int, train_length: int) -> float:
        """α at this length: f·L/L_train − (f − 1), 1 within the training length."""
        f = self.default_factor if self.param is None else float(self.param)
        return max(1.0, f * length / train_length - (f - 1.0))

    def setting_at(self, length: int, train_length: int) -> str:
        f = self.default_factor if self.param is None else float(self.param)
        return f"f = {f:g}, α = {self.scale(length, train_length):g}"

    def rope_base(self, base: float, d_head: int, length: int, train_length: int) -> float:
        return base * self.scale(length, train_length) ** (d_head / (d_head - 2))


YARN_BETA_FAST = 32.0  # pairs turning more often than this over L_train keep their frequency (YaRN's default)
YARN_BETA_SLOW = 1.0  # pairs turning less often than this are interpolated by s (YaRN's default)


def yarn_ramp(d_head: int, base: float, train_length: int) -> torch.Tensor:
    """YaRN's blend per pair j (float64, (D/2,)): 0 keeps ω_j, 1 divides it by s. The pair that turns r
    times over L_train sits at j(r) = D·ln(L_train / (2π·r)) / (2·ln base); the ramp is linear in j from
    ⌊j(β_fast)⌋ to ⌈j(β_slow)⌉, both clamped to [0, D − 1] (YaRN's code, and transformers')."""
    def index(rotations: float) -> float:
        return d_head * math.log(train_length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(index(YARN_BETA_FAST)), 0)
    high = min(math.ceil(index(YARN_BETA_SLOW)), d_head - 1)
    if low == high:
        high += 0.001  # as YaRN's code: no division by zero, a step at `low`
    j = torch.arange(d_head // 2, dtype=torch.float64)
    return ((j - low) / (high - low)).clamp(0.0, 1.0)


@dataclass(frozen=True)
class NTKByParts(InferenceRule):
    """Changes the carrier: YaRN's frequencies, ω_j·(1 − γ_j) + (ω_j / s)·γ_j with γ YaRN's ramp
    (`yarn_ramp`): the fast pairs stay, the slow ones are interpolated by s. RoPE only."""

    name: ClassVar[str] = "ntk-by-parts"
    changes: ClassVar[str] = "carrier"
    param_name: ClassVar[str | None] = "scale s"
    summary: ClassVar[str] = "YaRN's frequencies: fast pairs kept, slow ones ÷ s, a ramp between, s = L / L_train"

    def identity_at(self, length: int, train_length: int) -> bool:
        return self._scale_is_one(length, train_length)

    def check(self, config: RunConfig) -> None:
        _rope_only(self, config, "interpolates RoPE's frequencies")

    def rope_frequencies(self, frequencies: torch.Tensor, base: float, d_head: int, length: int,
                         train_length: int) -> torch.Tensor:
        ramp = yarn_ramp(d_head, base, train_length)
        s = self.scale(length, train_length)
        return frequencies / s * ramp + frequencies * (1.0 - ramp)


MAX_TABLE_ENTRIES = 256  # D/2 at the widest head (d_model 512, one head)
MAX_TABLE_CHARACTERS = 600  # a table written longer than this is refused before it is parsed


def table_text(table: tuple[float, ...]) -> str:
    """(1, 1, 2, 4, 4) → '1x2/2/4x2': each run of equal factors as factorxcount."""
    parts, start = [], 0
    for i in range(1, len(table) + 1):
        if i == len(table) or table[i] != table[start]:
            count = i - start
            parts.append(f"{table[start]:g}" if count == 1 else f"{table[start]:g}x{count}")
            start = i
    return "/".join(parts)


@dataclass(frozen=True)
class LongRoPE(InferenceRule):
    """Changes the carrier: ω_j / λ_j beyond L_train, λ a table of D/2 factors (LongRoPE's long factors;
    its short factors are ones, so nothing moves within L_train). RoPE only."""

    name: ClassVar[str] = "longrope"
    changes: ClassVar[str] = "carrier"
    param_name: ClassVar[str | None] = "table λ"
    summary: ClassVar[str] = "ω_j ÷ λ_j from a table of D/2 factors (default: fast half 1, slow half L / L_train)"

    def __post_init__(self) -> None:
        if self.param is None:
            return
        table = self.param
        if not isinstance(table, tuple) or not table:
            raise RuleError(f"longrope's table must be a list of factors such as 1x32/4x32, got {table!r}")
        if len(table) > MAX_TABLE_ENTRIES:
            raise RuleError(f"longrope's table has {len(table):,} factors: at most {MAX_TABLE_ENTRIES}, one per "
                            "frequency pair (D/2)")
        for value in table:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or not 1.0 <= value <= MAX_RULE_SCALE:
                raise RuleError(f"longrope's factor {value!r} is out of range: allowed {self.allowed()} (a factor "
                                "divides a frequency; below 1 it would speed a wave up)")

    @property
    def param_text(self) -> str:
        return "" if self.param is None else table_text(self.param)

    @classmethod
    def parse_param(cls, text: str) -> tuple[float, ...]:
        """'1x32/4x32' → (1.0,) * 32 + (4.0,) * 32; RuleError naming the part at fault and the form allowed."""
        form = "factors joined by '/', such as 1x32/2/4x31 (4x31 is the factor 4, 31 times)"
        if len(text) > MAX_TABLE_CHARACTERS:
            raise RuleError(f"longrope's table is {len(text):,} characters long: at most {MAX_TABLE_CHARACTERS}")
        table: list[float] = []
        for part in text.split("/"):
            value, times_sign, count = part.strip().partition("x")
            try:
                number = float(value)
                times = int(count) if times_sign else 1
            except ValueError:
                raise RuleError(f"longrope's table has {part[:40]!r}, not a factor: write {form}") from None
            if times < 1:
                raise RuleError(f"longrope's table has {part[:40]!r}: a count must be 1 or more")
            if len(table) + times > MAX_TABLE_ENTRIES:
                raise RuleError(f"longrope's table has {part[:40]!r}: a table holds at most {MAX_TABLE_ENTRIES} "
                                "factors, one per frequency pair (D/2)")
            table.extend([number] * times)
        return tuple(table)

    def identity_at(self, length: int, train_length: int) -> bool:
        return length <= train_length

    def check(self, config: RunConfig) -> None:
        _rope_only(self, config, "rescales RoPE's frequencies")
        pairs = config.model.d_model // config.model.n_heads // 2
        if self.param is not None and len(self.param) != pairs:
            raise RuleError(f"longrope's table has {len(self.param)} factors; this run's heads are {2 * pairs} wide, "
                            f"so it needs {pairs}, one per frequency pair (for example 1x{pairs // 2}/4x"
                            f"{pairs - pairs // 2})")

    def table(self, pairs: int, length: int, train_length: int) -> torch.Tensor:
        """λ_j at this length (float64, (D/2,)): the chosen table, or 1 for the fast half and L / L_train
        for the slow half."""
        if self.param is not None:
            return torch.tensor(self.param, dtype=torch.float64)
        s = max(1.0, length / train_length)
        return torch.tensor([1.0] * (pairs // 2) + [s] * (pairs - pairs // 2), dtype=torch.float64)

    def scale(self, length: int, train_length: int) -> float:
        """The largest factor of the table at this length."""
        return max(1.0, length / train_length) if self.param is None else max(self.param)

    def setting_at(self, length: int, train_length: int) -> str:
        if self.param is None:
            return f"λ = 1 then {max(1.0, length / train_length):g}"
        return f"λ = {min(self.param):g} to {max(self.param):g}"

    def rope_frequencies(self, frequencies: torch.Tensor, base: float, d_head: int, length: int,
                         train_length: int) -> torch.Tensor:
        return frequencies / self.table(d_head // 2, length, train_length)

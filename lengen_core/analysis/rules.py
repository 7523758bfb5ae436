"""Length-aware inference rules: the same trained weights, read another way at test length L
(docs/rules.md). Nothing is retrained; a rule changes either the logits or the carrier.

- `none`: the model as trained.
- `log-n`: logits × max(1, ln n / ln L_train), n the keys a query sees (Qwen's logn attention: a
  query that sees no more keys than in training keeps its logits, so nothing inside the training
  length moves). The margin m becomes m·ln n / ln L_train, so e^{m}/n grows with n once m > ln L_train.
- `ssmax`: Scalable-Softmax, logits × s·ln n at every n, with s chosen (default 1 / ln L_train:
  then the last query of a training-length sequence keeps its logits).
- `yarn`: YaRN's temperature alone, logits × (0.1·ln s + 1)², s = L / L_train (or the s chosen), 1
  within the training length. YaRN's frequency interpolation is not part of it (that is `ntk`'s kind).
- `pi`: Position Interpolation, positions × 1/s with s = L / L_train (or the s chosen), so the
  positions 0 … L−1 of a length-L sequence fall in [0, L_train). The carrier's peak at offset k
  moves to offset k·s.
- `ntk`: NTK-aware base scaling, RoPE's base × α^{D/(D−2)} with α = L / L_train (or the α chosen),
  D the head width: the fastest frequency stays, the slowest is slowed by α.
- `dynamic`: dynamic NTK (the transformers library's `dynamic` rope type): the base grows with the
  test length, base × (f·L/L_train − (f − 1))^{D/(D−2)} beyond L_train, f the factor (default 2); 1
  within L_train. At f = 1 it is `ntk`'s default.
- `ntk-by-parts`: YaRN's frequencies (transformers' `yarn` rope type without its attention factor,
  which is `yarn`'s temperature): pairs that turn more than β_fast = 32 times over L_train stay, pairs
  that turn less than β_slow = 1 time are divided by s, and a linear ramp over the pair index blends
  the two between (the index bounds rounded outward, as YaRN's code does).
- `longrope`: LongRoPE's per-frequency rescale: ω_j / λ_j beyond L_train with a table λ of D/2
  factors, each 1 or more, written `1x32/2/4x31` (factors joined by '/'; 4x31 is 4, 31 times); the
  default table keeps the fast half and divides the slow half by s = L / L_train.

The scale of `yarn`, `pi`, `ntk` and `ntk-by-parts` is L / L_train by default, never below 1, so within the
training length every rule but `ssmax` is the model as trained; a chosen value fixes it for every L.

Where a rule is defined: the logit rules (`log-n`, `ssmax`, `yarn`) for softmax attention (linear
attention has no softmax: a factor on its logits only scales the output and moves no mass); `pi` for
the encodings whose positions are continuous (RoPE, sinusoidal, ALiBi); the frequency rules (`ntk`,
`dynamic`, `ntk-by-parts`, `longrope`) for RoPE. Anything else raises `RuleError`, one line saying
what is allowed.

A rule acts through the encoding: `under_rule(model, rule, length)` returns a view of the model
whose encoding maps positions, changes RoPE's frequencies and sets a logit factor
(`PositionalEncoding.logit_scale`, which attention multiplies in). The view shares every weight with
the model and changes nothing in it, so concurrent readers of a shared model are safe; every path
that goes through the encoding (the chunked last-query evaluation, forward passes, heatmaps, the
carrier and the prediction from the weights) follows the rule.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from lengen_core.config import ConfigError, RunConfig
from lengen_core.models.encodings import NO_FLOAT64, PositionalEncoding, rope_frequencies, rope_rotate

MAX_RULE_SCALE = 1 << 20  # a chosen scale beyond this has no length the lab can evaluate to follow it
MAX_SSMAX_S = 100.0


def _number(value: float) -> str:
    """1 → '1', 1048576 → '1,048,576', 0.5 → '0.5'."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


class RuleError(ConfigError):
    """A rule that does not exist, a parameter out of range, or a rule undefined for a run."""


@dataclass(frozen=True)
class InferenceRule:
    """A rule and its parameter (None: the rule's default). Subclasses say what they change."""

    param: float | tuple[float, ...] | None = None

    name: ClassVar[str] = ""
    changes: ClassVar[str] = "nothing"  # "logits" or "carrier"
    param_name: ClassVar[str | None] = None  # what the parameter is, for messages; None: takes none
    param_low: ClassVar[float] = 1.0  # the smallest value the parameter may take
    param_high: ClassVar[float] = float(MAX_RULE_SCALE)
    summary: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.param is None:
            return
        if self.param_name is None:
            raise RuleError(f"the rule {self.name} takes no parameter (got {self.param!r})")
        value = self.param
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or not self.param_low <= value <= self.param_high:
            raise RuleError(f"{self.name}'s {self.param_name} {value!r} is out of range: allowed "
                            f"{self.allowed()}")
        if self.param_low == 0 and value == 0:
            raise RuleError(f"{self.name}'s {self.param_name} must be above 0")

    @classmethod
    def allowed(cls) -> str:
        """The parameter's range in words: '1 to 1,048,576', 'above 0, up to 100'."""
        if cls.param_low == 0:
            return f"above 0, up to {_number(cls.param_high)}"
        return f"{_number(cls.param_low)} to {_number(cls.param_high)}"

    @property
    def param_text(self) -> str:
        """The parameter as links and the command line write it ('4'), '' for the default."""
        return "" if self.param is None else f"{self.param:g}"

    @classmethod
    def parse_param(cls, text: str) -> float | tuple[float, ...]:
        """The parameter written as `text` (not blank); RuleError where it is not a number."""
        try:
            return float(text)
        except ValueError:
            raise RuleError(f"{cls.name}'s {cls.param_name or 'parameter'} {text[:40]!r} is not a number") from None

    @property
    def label(self) -> str:
        """How links and the command line write it: `ntk` or `ntk:4`."""
        return self.name if self.param is None else f"{self.name}:{self.param_text}"

    def setting_at(self, length: int, train_length: int) -> str:
        """The rule's setting at test length `length`, for captions: 's = 8'."""
        return f"s = {self.scale(length, train_length):g}"

    @property
    def trivial(self) -> bool:
        return False

    def check(self, config: RunConfig) -> None:
        """Raise RuleError where this rule is not defined for the run `config`."""

    def identity_at(self, length: int, train_length: int) -> bool:
        """Whether the rule changes nothing at test length `length`: then it is not applied at all, so
        the model read under it is the model as trained, bit for bit (ntk at α = 1, say)."""
        return False

    def scale(self, length: int, train_length: int) -> float:
        """s (or α): the chosen parameter, or L / L_train, never below 1."""
        return float(self.param) if self.param is not None else max(1.0, length / train_length)

    def _scale_is_one(self, length: int, train_length: int) -> bool:
        return self.scale(length, train_length) == 1.0

    def logit_factor(self, keys: torch.Tensor, length: int, train_length: int) -> torch.Tensor | None:
        """The factor on the logits of queries that see `keys` keys (float64), or None."""
        return None

    def position_factor(self, length: int, train_length: int) -> float:
        return 1.0

    def map_positions(self, positions: torch.Tensor, length: int, train_length: int) -> torch.Tensor:
        """Positions as the encoding sees them under the rule: unchanged, or × `position_factor` in
        float64 (float32 on a device without float64: PI's positions stay below L_train ≤ 512, where
        float32 keeps them to 1e-4)."""
        factor = self.position_factor(length, train_length)
        if factor == 1.0:
            return positions
        dtype = torch.float32 if positions.device.type in NO_FLOAT64 else torch.float64
        return positions.to(dtype) * factor

    def rope_base(self, base: float, d_head: int, length: int, train_length: int) -> float:
        return base

    def rope_frequencies(self, frequencies: torch.Tensor, base: float, d_head: int, length: int,
                         train_length: int) -> torch.Tensor:
        """RoPE's ω_j under the rule (float64, (D/2,)), from the run's `frequencies` at `base`: the
        frequencies of `rope_base` where a rule moves the base, else the run's own."""
        ruled = self.rope_base(base, d_head, length, train_length)
        return frequencies if ruled == base else rope_frequencies(d_head, ruled)


def _softmax_only(rule: InferenceRule, config: RunConfig) -> None:
    if config.model.attention != "softmax":
        raise RuleError(f"{rule.name} scales the logits before the softmax, and {config.model.attention} attention "
                        "has none (its weights are the logits: a factor only scales the output); use it with "
                        "softmax attention, or use none")


@dataclass(frozen=True)
class NoRule(InferenceRule):
    name: ClassVar[str] = "none"
    summary: ClassVar[str] = "the model as trained"

    @property
    def trivial(self) -> bool:
        return True

    def identity_at(self, length: int, train_length: int) -> bool:
        return True


@dataclass(frozen=True)
class LogN(InferenceRule):
    """Changes the logits: × max(1, ln n / ln L_train). Softmax attention, any encoding."""

    name: ClassVar[str] = "log-n"
    changes: ClassVar[str] = "logits"
    summary: ClassVar[str] = "logits × ln n / ln L_train beyond the training length"

    def check(self, config: RunConfig) -> None:
        _softmax_only(self, config)

    def logit_factor(self, keys: torch.Tensor, length: int, train_length: int) -> torch.Tensor:
        return (torch.log(keys) / math.log(train_length)).clamp(min=1.0)

    def identity_at(self, length: int, train_length: int) -> bool:
        return length <= train_length  # no query sees more keys than in training


@dataclass(frozen=True)
class ScalableSoftmax(InferenceRule):
    """Changes the logits: × s·ln n at every n. Softmax attention, any encoding."""

    name: ClassVar[str] = "ssmax"
    changes: ClassVar[str] = "logits"
    param_name: ClassVar[str | None] = "s"
    param_low: ClassVar[float] = 0.0
    param_high: ClassVar[float] = MAX_SSMAX_S
    summary: ClassVar[str] = "logits × s·ln n (default s = 1 / ln L_train)"

    def check(self, config: RunConfig) -> None:
        _softmax_only(self, config)

    def logit_factor(self, keys: torch.Tensor, length: int, train_length: int) -> torch.Tensor:
        s = 1.0 / math.log(train_length) if self.param is None else float(self.param)
        return s * torch.log(keys)


@dataclass(frozen=True)
class YarnTemperature(InferenceRule):
    """Changes the logits: × (0.1·ln s + 1)², s = L / L_train. Softmax attention, any encoding."""

    name: ClassVar[str] = "yarn"
    changes: ClassVar[str] = "logits"
    param_name: ClassVar[str | None] = "scale s"
    summary: ClassVar[str] = "logits × (0.1·ln s + 1)², s = L / L_train"

    def identity_at(self, length: int, train_length: int) -> bool:
        return self._scale_is_one(length, train_length)

    def check(self, config: RunConfig) -> None:
        _softmax_only(self, config)

    def logit_factor(self, keys: torch.Tensor, length: int, train_length: int) -> torch.Tensor:
        factor = (0.1 * math.log(self.scale(length, train_length)) + 1.0) ** 2
        return torch.full_like(keys, factor)


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


RULES: dict[str, type[InferenceRule]] = {
    rule.name: rule for rule in (NoRule, LogN, ScalableSoftmax, YarnTemperature, PositionInterpolation, NTKScaling,
                                 DynamicNTK, NTKByParts, LongRoPE)
}
CARRIER_RULES = tuple(name for name, rule in RULES.items() if rule.changes == "carrier")


def make_rule(name: str, param: float | None = None) -> InferenceRule:
    """The rule called `name` with `param` (None: its default); RuleError for an unknown name or value."""
    rule = RULES.get(name)
    if rule is None:
        raise RuleError(f"unknown inference rule {name!r}: allowed {', '.join(RULES)}")
    return rule(param)


def rule_with_parameter(name: str, text: str) -> InferenceRule:
    """The rule `name` with its parameter written as `text` (blank: the rule's default)."""
    text = text.strip()
    if not text:
        return make_rule(name)
    if name not in RULES:
        return make_rule(name)  # the unknown name's message
    return make_rule(name, RULES[name].parse_param(text))


def parse_rule(text: str) -> InferenceRule:
    """`name` or `name:param`, as links and the command line write a rule."""
    name, _, value = text.strip().partition(":")
    return rule_with_parameter(name, value)


class RuledEncoding(PositionalEncoding):
    """An encoding read under a rule at one test length: positions × the rule's factor, RoPE's
    frequencies from the rule's base (× the position factor), the rule's logit factor."""

    def __init__(self, inner: PositionalEncoding, rule: InferenceRule, length: int, config: RunConfig) -> None:
        super().__init__()
        rule.check(config)
        self.inner, self.rule, self.length = inner, rule, length
        self.train_length = config.task.train_length
        for flag in ("additive", "rotary", "relative", "trained_positions", "single_head_limit"):
            setattr(self, flag, getattr(inner, flag))
        self.position_factor = rule.position_factor(length, self.train_length)
        if self.rotary:  # the rotation at position p by ω'·p·f: PI's map folded into the frequencies
            d_head = config.model.d_model // config.model.n_heads
            frequencies = rule.rope_frequencies(inner.frequencies, config.model.rope_base, d_head, length,
                                                self.train_length)
            self.frequencies = frequencies if self.position_factor == 1.0 else frequencies * self.position_factor
        table = getattr(inner, "table", None)
        if table is not None:
            self.table = table  # a learned table's end, for horizon_ceiling

    def _map(self, positions: torch.Tensor) -> torch.Tensor:
        return self.rule.map_positions(positions, self.length, self.train_length)

    def check_length(self, length: int) -> None:
        self.inner.check_length(length)

    def embed(self, positions: torch.Tensor) -> torch.Tensor | None:
        return self.inner.embed(self._map(positions))

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return rope_rotate(x, positions, self.frequencies) if self.rotary else self.inner.rotate(x, positions)

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor | None:
        return self.inner.bias(self._map(query_positions), self._map(key_positions))

    def logit_scale(self, query_positions: torch.Tensor) -> torch.Tensor | None:
        keys = query_positions.cpu().to(torch.float64) + 1.0  # a query at t sees the keys 0 … t (CPU: MPS has no float64)
        factor = self.rule.logit_factor(keys, self.length, self.train_length)
        return None if factor is None else factor.to(torch.float32).to(query_positions.device)


def _view(module: nn.Module, **children: nn.Module) -> nn.Module:
    """A shallow copy of `module` sharing its parameters, with some child modules replaced."""
    view = copy.copy(module)
    view._modules = dict(module._modules)
    for name, child in children.items():
        view._modules[name] = child
    return view


def under_rule(model: nn.Module, rule: InferenceRule | None, length: int) -> nn.Module:
    """`model` read under `rule` at test length `length`: the model itself where the rule changes
    nothing there (`identity_at`), else a view sharing its weights."""
    if rule is None:
        return model
    rule.check(model.config)
    if rule.identity_at(length, model.config.task.train_length):
        return model
    encoding = RuledEncoding(model.encoding, rule, length, model.config)
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return _view(model, encoding=encoding)
    return _view(model, encoding=encoding, blocks=nn.ModuleList(_view(block, encoding=encoding) for block in blocks))

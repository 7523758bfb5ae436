"""What every inference rule is (lengen_core.analysis.rules): its parameter and its range, its label, the hooks
an encoding reads under it (a logit factor, a position factor, RoPE's frequencies), and `RuleError`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from lengen_core.config import ConfigError, RunConfig
from lengen_core.models.encodings import NO_FLOAT64, rope_frequencies

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


@dataclass(frozen=True)
class NoRule(InferenceRule):
    name: ClassVar[str] = "none"
    summary: ClassVar[str] = "the model as trained"

    @property
    def trivial(self) -> bool:
        return True

    def identity_at(self, length: int, train_length: int) -> bool:
        return True

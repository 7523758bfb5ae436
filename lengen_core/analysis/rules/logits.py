"""The rules that change the logits (lengen_core.analysis.rules): log-n, Scalable-Softmax and YaRN's
temperature, each a factor on a query's logits, defined for softmax attention."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from lengen_core.analysis.rules.base import MAX_SSMAX_S, InferenceRule, RuleError
from lengen_core.config import RunConfig


def _softmax_only(rule: InferenceRule, config: RunConfig) -> None:
    if config.model.attention != "softmax":
        raise RuleError(f"{rule.name} scales the logits before the softmax, and {config.model.attention} attention "
                        "has none (its weights are the logits: a factor only scales the output); use it with "
                        "softmax attention, or use none")


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

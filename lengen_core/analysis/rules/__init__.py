"""Length-aware inference rules: the same trained weights, read another way at test length L
(docs/rules.md). Nothing is retrained; a rule changes either the logits or the carrier.

- `none`: the model as trained.
- `log-n`: logits × max(1, ln n / ln L_train), n the keys a query sees (Qwen's logn attention: a
  query that sees no more keys than in training keeps its logits, so nothing inside the training
  length moves). The margin m becomes m·ln n / ln L_train, so e^{m}/n grows with n once m > ln L_train.
- `ssmax`: Scalable-Softmax, logits × s·ln n at every n, with s chosen (default 1 / ln L_train:
  then the last query of a training-length sequence keeps its logits).
- `yarn`: YaRN's temperature alone, logits × (0.1·ln s + 1)², s = L / L_train (or the s chosen), 1
  within the training length. YaRN's frequencies are not part of it (they are `ntk-by-parts`).
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

The package: `base` (what a rule is, its parameter, the hooks an encoding reads), `logits` (log-n, ssmax,
yarn), `carrier` (pi and the RoPE frequency rules); here the registry, the parsers and the view.
"""


from __future__ import annotations

import copy

import torch
from torch import nn

from lengen_core.analysis.rules.base import MAX_RULE_SCALE, MAX_SSMAX_S, InferenceRule, NoRule, RuleError
from lengen_core.analysis.rules.carrier import (
    CONTINUOUS_POSITIONS,
    MAX_TABLE_CHARACTERS,
    MAX_TABLE_ENTRIES,
    DynamicNTK,
    LongRoPE,
    NTKByParts,
    NTKScaling,
    PositionInterpolation,
    table_text,
    yarn_ramp,
)
from lengen_core.analysis.rules.logits import LogN, ScalableSoftmax, YarnTemperature
from lengen_core.config import RunConfig
from lengen_core.models.encodings import PositionalEncoding, rope_rotate

__all__ = [
    "CARRIER_RULES", "CONTINUOUS_POSITIONS", "MAX_RULE_SCALE", "MAX_SSMAX_S", "MAX_TABLE_CHARACTERS",
    "MAX_TABLE_ENTRIES", "RULES", "DynamicNTK", "InferenceRule", "LogN", "LongRoPE", "NTKByParts", "NTKScaling",
    "NoRule", "PositionInterpolation", "RuleError", "RuledEncoding", "ScalableSoftmax", "YarnTemperature",
    "make_rule", "parse_rule", "rule_with_parameter", "table_text", "under_rule", "yarn_ramp",
]

RULES: dict[str, type[InferenceRule]] = {
    rule.name: rule for rule in (NoRule, LogN, ScalableSoftmax, YarnTemperature, PositionInterpolation, NTKScaling,
                                 DynamicNTK, NTKByParts, LongRoPE)
}
CARRIER_RULES = tuple(name for name, rule in RULES.items() if rule.changes == "carrier")


def make_rule(name: str, param: float | tuple[float, ...] | None = None) -> InferenceRule:
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

"""The frequency rules and RoPE's rotation against a reference implementation: the transformers library's
rope utilities (`ROPE_INIT_FUNCTIONS`, Llama's `apply_rotary_pos_emb`), a test dependency
(requirements-dev.txt). docs/rules.md, "Checked against transformers".

transformers forms its frequencies in float32 and the lab in float64, so the rules' frequencies agree to
float32's precision (a relative 2.5e-7, about two float32 steps); where both sides are float64 (the
rotation) they agree to 1e-12. The configs are not the defaults: head widths 16, 64 and 128, bases 500,
10,000 and 10^6, training lengths 12, 16 and 32, test lengths at and past them.
"""

from __future__ import annotations

import math

import pytest
import torch

from lengen_core.analysis.rules import make_rule, yarn_ramp
from lengen_core.frequencies import rope_frequencies
from lengen_core.models.encodings import rope_rotate

transformers = pytest.importorskip("transformers", reason="the oracle is the transformers library (requirements-dev.txt)")
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

FLOAT32 = 2.5e-7  # relative: transformers' frequencies are float32
HEADS = ((16, 500.0, 12), (64, 1e6, 32), (128, 10_000.0, 16))  # (D, base, L_train)
MULTIPLES = (1.5, 3, 64)


def _reference(rope_type: str, d_head: int, base: float, train_length: int, length: int, **parameters):
    config = LlamaConfig(hidden_size=d_head, num_attention_heads=1, head_dim=d_head,
                         max_position_embeddings=parameters.pop("max_positions", train_length),
                         rope_parameters={"rope_type": rope_type, "rope_theta": base, **parameters})
    frequencies, attention_factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=length)
    return frequencies.to(torch.float64), attention_factor


def _ours(label: str | tuple, d_head: int, base: float, train_length: int, length: int) -> torch.Tensor:
    rule = make_rule(*label) if isinstance(label, tuple) else make_rule(label)
    return rule.rope_frequencies(rope_frequencies(d_head, base), base, d_head, length, train_length)


def _relative(ours: torch.Tensor, reference: torch.Tensor) -> float:
    assert ours.shape == reference.shape
    return float(((ours - reference).abs() / reference).max())


@pytest.mark.parametrize(("d_head", "base", "train_length"), HEADS)
@pytest.mark.parametrize("factor", [1.0, 2.0, 3.5])
def test_dynamic_ntk_is_transformers_dynamic_rope_type(d_head: int, base: float, train_length: int,
                                                       factor: float) -> None:
    for length in (train_length, *(int(m * train_length) for m in MULTIPLES)):
        reference, _ = _reference("dynamic", d_head, base, train_length, length, factor=factor)
        assert _relative(_ours(("dynamic", factor), d_head, base, train_length, length), reference) < FLOAT32


@pytest.mark.parametrize(("d_head", "base", "train_length"), HEADS)
def test_ntk_at_its_default_scale_is_dynamic_ntk_at_factor_1(d_head: int, base: float, train_length: int) -> None:
    """The claim docs/rules.md made before these rules: `ntk`'s base is dynamic NTK's frequencies (f = 1)."""
    for length in (int(m * train_length) for m in MULTIPLES):
        reference, _ = _reference("dynamic", d_head, base, train_length, length, factor=1.0)
        assert _relative(_ours("ntk", d_head, base, train_length, length), reference) < FLOAT32


@pytest.mark.parametrize(("d_head", "base", "train_length"), HEADS)
@pytest.mark.parametrize("multiple", MULTIPLES)
def test_ntk_by_parts_is_transformers_yarn_frequencies_and_yarn_its_attention_factor(
        d_head: int, base: float, train_length: int, multiple: float) -> None:
    length = int(multiple * train_length)
    s = length / train_length
    reference, attention_factor = _reference("yarn", d_head, base, train_length, length, factor=s,
                                             original_max_position_embeddings=train_length, max_positions=length)
    ours = _ours("ntk-by-parts", d_head, base, train_length, length)
    assert _relative(ours, reference) < FLOAT32
    plain = rope_frequencies(d_head, base)
    ramp = yarn_ramp(d_head, base, train_length)
    assert torch.equal(ours[ramp == 0], plain[ramp == 0])  # the fast pairs are untouched
    assert torch.allclose(ours[ramp == 1], plain[ramp == 1] / s, rtol=1e-15, atol=0)  # the slow ones are PI's
    # YaRN's attention factor scales cos and sin, so each logit by its square: the rule `yarn`
    factor = make_rule("yarn").logit_factor(torch.ones(1, dtype=torch.float64), length, train_length)
    assert math.isclose(float(factor), attention_factor ** 2, rel_tol=1e-12)


@pytest.mark.parametrize(("d_head", "base", "train_length"), HEADS)
def test_longrope_is_transformers_longrope_long_factors_beyond_the_training_length(
        d_head: int, base: float, train_length: int) -> None:
    pairs = d_head // 2
    table = tuple(1.0 + (j * 7 % 11) / 3 for j in range(pairs))  # uneven, not monotone: each pair its own
    ones = [1.0] * pairs
    for length in (train_length, *(int(m * train_length) for m in MULTIPLES)):
        reference, _ = _reference("longrope", d_head, base, train_length, length, long_factor=list(table),
                                  short_factor=ones, original_max_position_embeddings=train_length,
                                  max_positions=4 * train_length)
        ours = _ours(("longrope", table), d_head, base, train_length, length)
        if length <= train_length:  # the short factors, ones: the rule is not applied there at all
            assert make_rule("longrope", table).identity_at(length, train_length)
            assert _relative(rope_frequencies(d_head, base), reference) < FLOAT32
        else:
            assert _relative(ours, reference) < FLOAT32


@pytest.mark.parametrize("d_head", [16, 128])
def test_rope_rotation_is_llamas_apply_rotary_pos_emb_up_to_position_a_million(d_head: int) -> None:
    generator = torch.Generator().manual_seed(3)
    positions = torch.cat((torch.arange(64), torch.randint(64, 10**6, (192,), generator=generator),
                           torch.tensor([10**6 - 1])))
    frequencies = rope_frequencies(d_head, 10_000.0)
    q, k = torch.randn(2, 1, 2, len(positions), d_head, dtype=torch.float64, generator=generator)  # (B, H, T, D) each
    angles = positions.to(torch.float64)[:, None] * frequencies[None, :]  # (T, D/2)
    emb = torch.cat((angles, angles), dim=-1)[None]  # (1, T, D): Llama's layout
    q_ref, k_ref = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    assert torch.allclose(rope_rotate(q, positions, frequencies), q_ref, rtol=0, atol=1e-12)
    assert torch.allclose(rope_rotate(k, positions, frequencies), k_ref, rtol=0, atol=1e-12)

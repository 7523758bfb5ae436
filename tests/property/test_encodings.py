"""Positional encodings and configs: every mathematical claim about them, checked on random inputs.

- RoPE (C3): the logit q_t·k_u depends on t − u alone, up to positions of 10^6; the half-split
  pairing rotates z_j = x_j + i·x_{j+D/2} by e^{iω_j p}.
- Causality: for every encoding and both attentions, the output at query t ignores tokens after t.
- ALiBi: slopes and bias against naive loops over the rule of Press et al. (2022).
- Config validation: any input gives a valid `RunConfig` or a `ConfigError`, never another error.
"""

from __future__ import annotations

import cmath
import dataclasses
import math
from typing import get_args

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lengen_core.config import (
    MAX_TRAIN_LENGTH,
    AttentionName,
    ConfigError,
    EncodingName,
    ModelConfig,
    RunConfig,
    TaskConfig,
    TrainConfig,
    with_changes,
)
from lengen_core.models import encodings
from lengen_core.models.encodings import ALiBi, alibi_slopes, reduced_angles, rope_frequencies, rope_rotate
from lengen_core.models.head import build_model
from tests.helpers.causal_inputs import tokens_with_changed_future
from tests.helpers.example_counts import fewer_examples

ENCODINGS = get_args(EncodingName)
ATTENTIONS = get_args(AttentionName)
MAX_POSITION = 10**6
# float32 rounding of a correct rotation moves a logit by ~1e-7 of |q||k|; float32 angles at 10^6
# move it by ~1e-3 (see test_the_shift_tolerance_would_catch_float32_angles).
SHIFT_TOLERANCE = 1e-5


def _rope_logit(q: torch.Tensor, k: torch.Tensor, t: int, u: int, frequencies: torch.Tensor) -> float:
    """q rotated to position t dotted with k rotated to position u, in the vectors' own dtype."""
    q_rot = rope_rotate(q[None], torch.tensor([t]), frequencies)[0]
    k_rot = rope_rotate(k[None], torch.tensor([u]), frequencies)[0]
    return float(q_rot @ k_rot)


# --- RoPE -------------------------------------------------------------------------------------------


@st.composite
def shifted_positions(draw) -> tuple[int, int, int]:
    """Query t, key u and a common shift s with t, u, t+s, u+s all in [0, 10^6]."""
    t = draw(st.integers(0, MAX_POSITION))
    u = draw(st.integers(0, MAX_POSITION))
    shift = draw(st.integers(-min(t, u), MAX_POSITION - max(t, u)))
    return t, u, shift


def _reduced_logit(q: torch.Tensor, k: torch.Tensor, t: int, u: int, frequencies: torch.Tensor) -> float:
    """As `_rope_logit`, with the float32 angles a device without float64 (MPS) gets: formed in float64
    on the CPU and reduced modulo 2π before they become float32."""
    def rotate(x: torch.Tensor, p: int) -> torch.Tensor:
        angles = reduced_angles(torch.tensor([p]), frequencies)[0]  # float32, in [0, 2π)
        half = x.shape[-1] // 2
        x1, x2 = x[:half], x[half:]
        return torch.cat((x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() + x2 * angles.cos()))

    return float(rotate(q, t) @ rotate(k, u))


# deadline: whichever torch test runs first in a process pays torch's lazy initialisation in its first
# example (1.2 s measured), past the default deadline of the `thorough` profile.
@pytest.mark.parametrize("logit", [_rope_logit, _reduced_logit], ids=["float64 angles", "float32 path (MPS)"])
@settings(deadline=None)
@given(
    positions=shifted_positions(),
    d_head=st.sampled_from([2, 8, 64, 128]),
    base=st.sampled_from([10_000.0, 500.0, 1e6]),
    seed=st.integers(0, 2**31 - 1),
)
@example(positions=(MAX_POSITION, 0, 0), d_head=64, base=10_000.0, seed=0)
@example(positions=(0, 0, MAX_POSITION), d_head=64, base=10_000.0, seed=1)
@example(positions=(MAX_POSITION - 3, MAX_POSITION, -(MAX_POSITION - 3)), d_head=64, base=10_000.0, seed=2)
def test_rope_logit_is_unchanged_when_query_and_key_shift_together(logit, positions, d_head, base, seed):
    """On both paths, and the float32 path agrees with the float64 one to the same tolerance."""
    t, u, shift = positions
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d_head, generator=generator)  # float32, as in the model
    frequencies = rope_frequencies(d_head, base)
    scale = float(q.norm() * k.norm())  # the largest a logit can be
    before = logit(q, k, t, u, frequencies)
    after = logit(q, k, t + shift, u + shift, frequencies)
    assert after == pytest.approx(before, abs=SHIFT_TOLERANCE * scale)
    assert before == pytest.approx(_rope_logit(q, k, t, u, frequencies), abs=SHIFT_TOLERANCE * scale)


def test_a_model_on_a_device_without_float64_takes_the_reduced_path_and_keeps_its_outputs(monkeypatch):
    """The dispatch: with the CPU treated as a device without float64, a RoPE model's logits at
    positions past 10^5 agree with the float64 path's; and moving a model never converts the
    float64 frequencies (they are not a buffer, so `.to()` leaves them on the CPU in float64)."""
    config = with_changes(RunConfig(), n_layers=1, n_heads=2, d_model=16)
    model = build_model(config, torch.Generator().manual_seed(0)).eval()
    positions = torch.arange(100_000, 100_064)
    x = torch.randn(1, 2, 64, 8, generator=torch.Generator().manual_seed(1))
    exact = rope_rotate(x, positions, model.encoding.frequencies)
    monkeypatch.setattr(encodings, "NO_FLOAT64", frozenset({"cpu"}))
    reduced = rope_rotate(x, positions, model.encoding.frequencies)
    torch.testing.assert_close(reduced, exact, rtol=0, atol=2e-5)
    model.to(torch.float16)
    assert model.encoding.frequencies.dtype == torch.float64 and model.encoding.frequencies.device.type == "cpu"


def test_the_shift_tolerance_would_catch_float32_angles():
    """The tolerance above is tight enough to see the float32-angle error docs/science.md §3 warns of."""
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 64, generator=generator)
    frequencies = rope_frequencies(64, 10_000.0)

    def float32_logit(t: int, u: int) -> float:
        def rotate(x: torch.Tensor, p: int) -> torch.Tensor:
            angles = torch.tensor(float(p), dtype=torch.float32) * frequencies.float()  # the bug
            x1, x2 = x[:32], x[32:]
            return torch.cat((x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() + x2 * angles.cos()))

        return float(rotate(q, t) @ rotate(k, u))

    scale = float(q.norm() * k.norm())
    shifts = range(1, 11)
    broken = [abs(float32_logit(s + MAX_POSITION - 10, s) - float32_logit(MAX_POSITION - 10, 0)) for s in shifts]
    exact = [
        abs(
            _rope_logit(q, k, s + MAX_POSITION - 10, s, frequencies)
            - _rope_logit(q, k, MAX_POSITION - 10, 0, frequencies)
        )
        for s in shifts
    ]
    assert max(broken) > 10 * SHIFT_TOLERANCE * scale
    assert max(exact) < SHIFT_TOLERANCE * scale


def _naive_rope(x: list[float], position: int, base: float) -> list[float]:
    """Rotate z_j = x_j + i·x_{j+D/2} by e^{iω_j p}, ω_j = base^(-2j/D): one pair at a time."""
    half = len(x) // 2
    out = [0.0] * len(x)
    for j in range(half):
        omega = base ** (-2.0 * j / len(x))
        z = complex(x[j], x[j + half]) * cmath.exp(1j * omega * position)
        out[j], out[j + half] = z.real, z.imag
    return out


@settings(deadline=None)  # deadline: torch's lazy initialisation, as above
@given(
    d_head=st.sampled_from([2, 4, 16, 64]),
    positions=st.lists(st.integers(0, MAX_POSITION), min_size=1, max_size=4),
    base=st.sampled_from([10_000.0, 100.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_rope_pairs_feature_j_with_j_plus_half_as_one_complex_number(d_head, positions, base, seed):
    x = torch.randn(len(positions), d_head, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rotated = rope_rotate(x, torch.tensor(positions), rope_frequencies(d_head, base))
    naive = torch.tensor([_naive_rope(row.tolist(), p, base) for row, p in zip(x, positions)], dtype=torch.float64)
    torch.testing.assert_close(rotated, naive, rtol=0, atol=1e-9)


def test_rope_frequencies_follow_base_to_the_minus_two_j_over_d():
    frequencies = rope_frequencies(8, 10_000.0)
    expected = torch.tensor([10_000.0 ** (-2 * j / 8) for j in range(4)], dtype=torch.float64)
    assert frequencies.dtype == torch.float64
    torch.testing.assert_close(frequencies, expected, rtol=1e-15, atol=0)


# --- Causality --------------------------------------------------------------------------------------


# One example builds a model and runs it three times: tens of milliseconds, which a loaded 2-core
# machine stretches past the default deadline.
@fewer_examples(4, deadline=None)
@given(
    encoding=st.sampled_from(ENCODINGS),
    attention=st.sampled_from(ATTENTIONS),
    seed=st.integers(0, 2**31 - 1),
    length=st.integers(2, 24),
    data=st.data(),
)
def test_every_encoding_and_attention_is_causal(encoding, attention, seed, length, data):
    config = with_changes(RunConfig(), encoding=encoding, attention=attention, max_positions=64)
    model = build_model(config, torch.Generator().manual_seed(seed)).eval()
    V = config.task.vocab_size
    t = data.draw(st.integers(0, length - 2), label="query")
    tokens, changed = tokens_with_changed_future(V, length, t, seed + 1)
    with torch.no_grad():
        out, out_changed = model(tokens, query_start=0), model(changed, query_start=0)  # (B, T, V)
        weights = model.attend(tokens, query_start=0)[0].weights  # (B, 1, T, T)
    torch.testing.assert_close(out_changed[:, : t + 1], out[:, : t + 1], rtol=0, atol=0)
    above_diagonal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    assert (weights[:, :, above_diagonal] == 0).all()
    assert not torch.equal(out_changed[:, t + 1 :], out[:, t + 1 :])  # later queries do see the change


# --- ALiBi ------------------------------------------------------------------------------------------


def _naive_alibi_slopes(n_heads: int) -> list[float]:
    """Press et al. (2022): for n a power of two, slope h = 2^(-8(h+1)/n). Otherwise take the slopes
    of the largest power of two c below n, then every other slope of 2c (the 1st, 3rd, …) for the rest."""
    c = 1
    while 2 * c <= n_heads:
        c *= 2
    slopes = []
    for h in range(c):
        slopes.append(2.0 ** (-8.0 * (h + 1) / c))
    for m in range(n_heads - c):
        slopes.append(2.0 ** (-8.0 * (2 * m + 1) / (2 * c)))
    return slopes


def test_alibi_slopes_match_the_published_values():
    assert alibi_slopes(8).tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    assert alibi_slopes(3).tolist() == [1 / 16, 1 / 256, 1 / 4]
    assert alibi_slopes(1).tolist() == [1 / 256]


@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 33, 64])
def test_alibi_slopes_equal_a_naive_loop(n_heads):
    slopes = alibi_slopes(n_heads)
    assert slopes.shape == (n_heads,)
    torch.testing.assert_close(slopes, torch.tensor(_naive_alibi_slopes(n_heads)), rtol=1e-6, atol=0)


@settings(deadline=None)  # deadline: torch's lazy initialisation, as above
@given(
    n_heads=st.integers(1, 16),
    query_positions=st.lists(st.integers(0, 5_000), min_size=1, max_size=6),
    key_positions=st.lists(st.integers(0, 5_000), min_size=1, max_size=6),
)
def test_alibi_bias_equals_a_naive_double_loop(n_heads, query_positions, key_positions):
    bias = ALiBi(n_heads).bias(torch.tensor(query_positions), torch.tensor(key_positions))
    slopes = _naive_alibi_slopes(n_heads)
    naive = torch.zeros(n_heads, len(query_positions), len(key_positions))
    for h in range(n_heads):
        for i, t in enumerate(query_positions):
            for j, u in enumerate(key_positions):
                naive[h, i, j] = -slopes[h] * (t - u)
    assert bias.shape == naive.shape
    torch.testing.assert_close(bias, naive, rtol=1e-6, atol=1e-6)


# --- Config validation ------------------------------------------------------------------------------

FIELDS = {
    name: [f.name for f in dataclasses.fields(section)]
    for name, section in (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig))
}
# Ints up to ±2^1100 reach beyond float range (≈2^1024): they must give ConfigError too.
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**1100), 2**1100),
    st.integers(-3, 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-10, 10_000),
    st.text(max_size=8),
    st.sampled_from([*ENCODINGS, *ATTENTIONS, "retrieval", "shift", "fixed", "sampled", "RoPE", ""]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def config_dicts(draw) -> object:
    """Mostly well-shaped dicts with known and unknown keys and arbitrary values; sometimes anything."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    data = {}
    for section, names in FIELDS.items():
        kind = draw(st.sampled_from(["absent", "dict", "dict", "dict", "other"]))
        if kind == "other":
            data[section] = draw(json_values)
        elif kind == "dict":
            keys = draw(st.lists(st.sampled_from(names) | st.text(max_size=6), max_size=5, unique=True))
            data[section] = {key: draw(json_values) for key in keys}
    if draw(st.booleans()):
        data[draw(st.text(max_size=6))] = draw(json_values)
    return data


def _from_dict_or_config_error(data: object) -> RunConfig | None:
    try:
        config = RunConfig.from_dict(data)
    except ConfigError as error:
        assert str(error)  # a message a user can read
        return None
    assert isinstance(config, RunConfig)
    return config


@given(data=config_dicts())
def test_from_dict_gives_a_config_or_a_config_error(data):
    config = _from_dict_or_config_error(data)
    if config is not None:
        assert RunConfig.from_dict(config.to_dict()) == config  # what it accepted round-trips


@given(
    section=st.sampled_from(list(FIELDS)),
    data=st.data(),
    value=st.one_of(json_scalars, st.integers(-(10**9), 10**9)),
)
def test_a_single_bad_setting_is_a_config_error(section, data, value):
    name = data.draw(st.sampled_from(FIELDS[section]), label="setting")
    config = _from_dict_or_config_error({section: {name: value}})
    if config is not None:
        assert config.to_dict()[section][name] == value


@given(offset=st.integers(1, MAX_TRAIN_LENGTH), train_length=st.integers(2, MAX_TRAIN_LENGTH))
def test_offset_must_be_smaller_than_the_training_length(offset, train_length):
    data = {"task": {"offset": offset, "train_length": train_length}}
    if offset < train_length:
        assert RunConfig.from_dict(data).task.offset == offset
    else:
        with pytest.raises(
            ConfigError, match=f"offset {offset} must be smaller than the training length {train_length}"
        ):
            RunConfig.from_dict(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"task": {"offset": 20, "train_length": 16}}, "offset 20 must be smaller than the training length 16"),
        ({"task": {"offset": 16}}, "offset 16 must be smaller than the training length 16"),
        ({"model": {"encoding": "xpos"}}, "unknown encoding 'xpos'"),
        ({"model": {"attention": "flash"}}, "unknown attention 'flash'"),
        ({"model": {"d_model": -64}}, "d_model -64 is out of range"),
        ({"model": {"d_model": 10**12}}, "d_model 1000000000000 is out of range"),
        ({"model": {"d_model": "64"}}, "d_model must be a whole number"),
        ({"model": {"d_model": 64.5}}, "d_model must be a whole number"),
        ({"model": {"d_model": 63}}, "must be divisible by 2 × heads"),
        ({"model": {"encoding": "learned", "max_positions": 8}}, "max positions 8 must cover the training length 16"),
        ({"train": {"steps": True}}, "steps must be a whole number"),
        ({"train": {"learning_rate": float("nan")}}, "learning rate nan is out of range"),
        ({"train": {"learning_rate": float("inf")}}, "learning rate inf is out of range"),
        ({"train": {"keep_training": "yes"}}, "keep training must be true or false"),
        ({"train": {"lr": 0.1}}, "unknown train setting"),
        ({"optimizer": {}}, "unknown config section"),
        ({"task": [1, 2]}, "config section 'task' must be an object"),
        ({"task": None}, "config section 'task' must be an object"),
        ([], "a run config must be an object"),
        ("rope", "a run config must be an object"),
        ({"model": {"n_heads": 2}}, "the minimal model (layers 0) has exactly one head"),
        ({"model": {"n_layers": 2, "n_heads": 3}}, "d_model 128 must be divisible by 2 × heads (6)"),
        ({"task": {"task": "copy"}}, "unknown task 'copy': allowed retrieval, shift"),
    ],
)
def test_bad_configs_are_rejected_with_a_clear_message(data, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunConfig.from_dict(data)


def test_json_numbers_are_accepted_for_either_number_type():
    config = RunConfig.from_dict({"model": {"d_model": 32.0}, "train": {"learning_rate": 1, "steps": 100.0}})
    assert config.model.d_model == 32 and isinstance(config.model.d_model, int)
    assert config.train.learning_rate == 1.0 and isinstance(config.train.learning_rate, float)
    assert config.train.steps == 100


@pytest.mark.parametrize("data", [{"train": {"learning_rate": 10**400}}, {"model": {"rope_base": -(10**400)}}])
def test_an_integer_beyond_float_range_is_a_config_error(data):
    with pytest.raises(ConfigError):
        RunConfig.from_dict(data)


def test_with_changes_rejects_unknown_settings_and_validates():
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        with_changes(RunConfig(), colour="red")
    with pytest.raises(ConfigError, match="offset 16 must be smaller"):
        with_changes(RunConfig(), offset=16)
    assert math.isclose(with_changes(RunConfig(), learning_rate=1e-2).train.learning_rate, 1e-2)

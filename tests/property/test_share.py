"""Shareable links: any query string gives a valid config or a ConfigError; links round-trip; no run id escapes."""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from lengen.share import (
    CONFIG_KEYS,
    EXTRA_KEYS,
    MAIN_KEYS,
    _flat,
    _format,
    config_from_query,
    config_to_query,
    run_archive_chunks,
    run_id_from_query,
    view_int,
    view_ints,
)
from lengen.store import RunStore, StoreError
from lengen_core.config import ConfigError, RunConfig, with_changes
from lengen_core.models.head import build_model
from lengen_core.training import Run

hostile_text = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "1e999", "1_000", "0x10", "١٢", "3.0", "-1",
                     "9" * 40, "9" * 5000, "1e-400", "true", "rope", "learned", "fixed", "shift", "\x00"]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
values = st.one_of(hostile_text, st.lists(hostile_text, max_size=3))
keys = st.one_of(st.sampled_from(sorted(CONFIG_KEYS)), st.text(max_size=12))
queries = st.dictionaries(keys, values, max_size=8)


@given(params=queries)
def test_any_query_gives_a_valid_config_or_a_config_error(params):
    try:
        config = config_from_query(params)
    except ConfigError as error:
        assert str(error)
        return
    assert isinstance(config, RunConfig)
    assert RunConfig.from_dict(config.to_dict()) == config


@st.composite
def settings_strategy(draw) -> dict:
    """Flat settings, mostly valid by construction (offset < length, width a multiple of 2 × heads)."""
    layers = draw(st.integers(0, 8))
    heads = 1 if layers == 0 else draw(st.integers(1, 16))
    train_length = draw(st.integers(2, 512))
    changes = {
        "task": draw(st.sampled_from(["retrieval", "shift"])),
        "encoding": draw(st.sampled_from(["rope", "learned", "sinusoidal", "alibi", "nope"])),
        "attention": draw(st.sampled_from(["softmax", "linear"])),
        "train_length": train_length, "offset": draw(st.integers(1, train_length - 1)),
        "length_mode": draw(st.sampled_from(["fixed", "sampled"])), "vocab_size": draw(st.integers(2, 64)),
        "n_layers": layers, "n_heads": heads, "d_model": 2 * heads * draw(st.integers(1, 512 // (2 * heads))),
        "max_positions": draw(st.integers(train_length, 65_536)), "rope_base": draw(st.floats(2.0, 1e9)),
        "steps": draw(st.integers(1, 50_000)), "batch_size": draw(st.integers(1, 4096)),
        "learning_rate": draw(st.floats(1e-6, 1.0)), "weight_decay": draw(st.floats(0.0, 1.0)),
        "seed": draw(st.integers(0, 2**31 - 1)), "target_accuracy": draw(st.floats(0.0, 1.0)),
        "patience": draw(st.integers(1, 50_000)), "keep_training": draw(st.booleans()),
        "qk_init": draw(st.one_of(st.just(1.0), st.just(0.1), st.floats(1e-3, 10.0))),
    }
    kept = draw(st.sets(st.sampled_from(sorted(changes))))  # some settings stay at their defaults
    return {name: value for name, value in changes.items() if name in kept}


@given(changes=settings_strategy())
def test_a_valid_config_round_trips_through_its_link(changes):
    try:
        config = with_changes(RunConfig(), **changes)
    except ConfigError:
        assume(False)
    query = config_to_query(config)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in query.items())
    assert config_from_query(query) == config
    assert config_from_query(query).run_id() == config.run_id()


def link_written_before_the_switch(config: RunConfig) -> dict[str, str]:
    """The link the app wrote for `config` before the recipe became the default: every main key but
    qk_init, and the other keys (qk_init among them) only where they differed from the defaults of
    then (d_model 64, qk_init 1.0; the other settings' defaults have not changed)."""
    legacy = _flat(RunConfig.legacy_defaults())
    flat = _flat(config)
    main = {key: name for key, name in MAIN_KEYS.items() if name != "qk_init"}
    extra = {**EXTRA_KEYS, "qk_init": "qk_init"}
    return {**{key: _format(flat[name]) for key, name in main.items()},
            **{key: _format(flat[name]) for key, name in extra.items() if flat[name] != legacy[name]}}


@given(changes=settings_strategy())
def test_a_link_written_before_the_switch_opens_the_run_it_named(changes):
    try:
        config = with_changes(RunConfig(), **changes)
    except ConfigError:
        assume(False)
    old_link = link_written_before_the_switch(config)
    assert config_from_query(old_link) == config
    assert config_from_query(old_link).run_id() == config.run_id()


def test_the_old_default_link_opens_the_old_preset_and_a_new_link_the_recipe():
    old_rope_preset = "rope-softmax-retrieval-s0-ce9f6b56985b"  # the RoPE preset before the switch (d_model 64)
    old_link = {"task": "retrieval", "vocab": "16", "offset": "3", "train_length": "16", "length_mode": "fixed",
                "encoding": "rope", "attention": "softmax", "d_model": "64", "layers": "0", "heads": "1",
                "steps": "1500", "lr": "0.003", "seed": "0"}  # as the app wrote it then: no qk_init at 1.0
    assert config_from_query(old_link).model.qk_init == 1.0
    assert config_from_query(old_link).run_id() == old_rope_preset
    new_link = config_to_query(RunConfig())
    assert new_link["qk_init"] == "0.1" and new_link["d_model"] == "128"  # written in every link from now on
    assert config_from_query(new_link) == RunConfig()
    assert config_to_query(with_changes(RunConfig(), qk_init=1.0))["qk_init"] == "1.0"


ids = st.one_of(
    st.text(max_size=300),
    st.text(alphabet="ab./\\-_~:%2e\x00 \n", max_size=16),
    st.sampled_from(["../x", "/etc/passwd", "a/b", "%2e%2e", "..", ".", "..%2f", "a\\b", "~root", "C:\\x"]),
    st.from_regex(r"[a-z0-9][a-z0-9._-]{0,127}", fullmatch=True),
)


@pytest.fixture(scope="module")
def store() -> Iterator[RunStore]:
    with tempfile.TemporaryDirectory() as root:
        yield RunStore(Path(root))


@given(value=st.one_of(ids, st.lists(ids, max_size=3)))
def test_a_hostile_run_id_never_resolves_outside_the_store(store, value):
    try:
        run_id = run_id_from_query({"run": value})
    except (StoreError, ConfigError) as error:
        assert "run" in str(error)
        return
    assert run_id is not None
    path = store.run_dir(run_id)
    assert path.resolve().parent == store.runs_dir.resolve()


@pytest.mark.parametrize("run_id", ["../x", "/etc/passwd", "a/b", "%2e%2e", "..", ""])
def test_path_like_run_ids_are_a_message(run_id):
    with pytest.raises((StoreError, ConfigError), match="run"):
        run_id_from_query({"run": run_id})


@pytest.mark.parametrize("params, words", [
    ({"steps": "abc"}, ["'steps'", "whole number"]),
    ({"steps": "9" * 40}, ["'steps'", "too large"]),
    ({"steps": "999999"}, ["'steps'", "out of range"]),
    ({"lr": "nan"}, ["'lr'", "finite"]),
    ({"lr": "1e999"}, ["'lr'", "finite"]),
    ({"encoding": "xyz"}, ["'encoding'", "unknown encoding"]),
    ({"seed": ""}, ["'seed'", "empty"]),
    ({"seed": ["1", "2"]}, ["'seed'", "2 times"]),
    ({"offset": "20"}, ["'offset'", "smaller than the training length"]),
    ({"layers": "0", "heads": "4"}, ["'heads'", "one head"]),
    ({"keep_training": "maybe"}, ["'keep_training'", "true or false"]),
])
def test_a_bad_parameter_is_named_in_the_message(params, words):
    with pytest.raises(ConfigError) as raised:
        config_from_query(params)
    assert all(word in str(raised.value) for word in words), str(raised.value)


def test_unknown_keys_are_ignored_and_missing_keys_default():
    assert config_from_query({"utm_source": "mail", "samples": "64", "run": "x"}) == RunConfig()
    assert config_from_query({"qk_init": "0.1", "seed": "4"}) == with_changes(RunConfig(), seed=4)
    # Without qk_init a link was written before the recipe became the default: the defaults of then.
    assert config_from_query({"seed": "4"}) == with_changes(RunConfig.legacy_defaults(), seed=4)
    assert config_from_query({"seed": "4"}).model.d_model == 64


@given(params=st.dictionaries(st.sampled_from(["n", "m"]), values, max_size=2))
def test_view_settings_are_bounded_or_a_config_error(params):
    try:
        value = view_int(params, "n", 64, 1024, 256, choices=[64, 128, 256, 512, 1024])
    except ConfigError as error:
        assert "'n'" in str(error)
    else:
        assert value in (64, 128, 256, 512, 1024)
    try:
        many = view_ints(params, "n", 1, 100, (16,), max_count=4)
    except ConfigError as error:
        assert "'n'" in str(error)
    else:
        assert 1 <= len(many) <= 4 and all(1 <= v <= 100 for v in many)


def test_a_run_archive_holds_the_three_files(tmp_path):
    config = with_changes(RunConfig(), steps=1)
    model = build_model(config, torch.Generator().manual_seed(0))
    run = Run(config=config, model=model, device="cpu", steps=1, train_seconds=0.1, loss=1.0,
              train_accuracy=0.1, stopped_early=False, history={"step": [1], "loss": [1.0], "accuracy": [0.1]})
    store = RunStore(tmp_path)
    store.save(run)
    os.utime(store.run_dir(run.run_id), (0, 0))
    pieces = list(run_archive_chunks(store, run.run_id, chunk_bytes=4096))
    assert store.run_dir(run.run_id).stat().st_mtime > 0  # a download is a use, for the quota's eviction order
    weights_path = store.run_dir(run.run_id) / "weights.safetensors"
    assert len(pieces) > weights_path.stat().st_size // 4096  # made as it is read, not in one piece
    assert max(map(len, pieces)) <= 4096 + 1024  # a chunk and the headers around it
    with zipfile.ZipFile(io.BytesIO(b"".join(pieces))) as archive:
        assert archive.testzip() is None  # every member's CRC checks
        assert sorted(archive.namelist()) == ["config.json", "metrics.json", "weights.safetensors"]
        assert RunConfig.from_dict(json.loads(archive.read("config.json"))) == config
        weights = archive.getinfo("weights.safetensors")
        assert weights.compress_type == zipfile.ZIP_STORED  # safetensors do not compress: stored, not deflated
        assert archive.read("weights.safetensors") == weights_path.read_bytes()
    with pytest.raises(StoreError):
        run_archive_chunks(store, "../etc")
    with pytest.raises(StoreError):  # before the first piece: a server can still answer 404
        run_archive_chunks(store, "no-such-run")

"""Inference rules (lengen_core.analysis.rules, docs/rules.md): what each changes, where it is defined, and
the prediction from the weights under each rule against the measurement.

The claims run on the shipped presets (trained runs of the default config) and on two more trained
RoPE configs of the prediction panel, picked before any rule was measured on them.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math

import pytest
import torch

from lengen import cli
from lengen.store import preset_store
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate, last_query_outputs
from lengen_core.analysis.heatmap import attention_heatmap
from lengen_core.analysis.rules import RULES, RuleError, make_rule, parse_rule, under_rule
from lengen_core.analysis.sequence import evaluate_sequence
from lengen_core.config import RunConfig, with_changes
from tests.helpers.panel import with_trained_once

ROPE = "rope-softmax-retrieval-s0-bc1b0b2bb01a"  # the default config, trained (a shipped preset)
LEARNED = "learned-softmax-retrieval-s0-f15c14254359"
LINEAR = "rope-linear-retrieval-s0-09a3f491df18"
SHIFT = "rope-softmax-shift-s0-610017aab558"  # a two-layer transformer on the shift task
MULTIPLES = (1, 2, 4, 8, 16, 32, 64)
BOUND = 0.05  # |predicted − measured accuracy| at every length, for every rule defined for the run
SAMPLES = 1_024
OTHER_CONFIGS = (  # two configs of the prediction panel (tests/unit/test_prediction_panel.py), trained the same way
    dict(encoding="rope", offset=2, vocab_size=12, train_length=16, seed=2, target_accuracy=0.99),
    dict(encoding="rope", offset=4, vocab_size=16, train_length=12, seed=2, target_accuracy=0.99),
)


@pytest.fixture(scope="module")
def presets():
    store = preset_store()
    return {run_id: store.load(run_id) for run_id in (ROPE, LEARNED, LINEAR, SHIFT)}


def test_names_labels_and_parameters_parse_back() -> None:
    assert tuple(RULES) == ("none", "log-n", "ssmax", "yarn", "pi", "ntk", "dynamic", "ntk-by-parts", "longrope")
    for text in ("none", "log-n", "ssmax:0.4", "yarn", "yarn:8", "pi:2.5", "ntk:4", "dynamic", "dynamic:3",
                 "ntk-by-parts:2", "longrope", "longrope:1x32/4x32", "longrope:1x2/2/4x2/1.5"):
        assert parse_rule(text).label == text
    assert parse_rule("ntk:4") == make_rule("ntk", 4.0)
    assert parse_rule("longrope:1/1/2/4x2").param == (1.0, 1.0, 2.0, 4.0, 4.0)
    assert parse_rule("longrope:1/1/2/4x2").label == "longrope:1x2/2/4x2"  # written back compactly


@pytest.mark.parametrize(("text", "fragments"), [
    ("rope", ("unknown inference rule 'rope'", "none, log-n, ssmax, yarn, pi, ntk")),
    ("log-n:2", ("log-n takes no parameter",)),
    ("ntk:0.5", ("ntk's scale α 0.5 is out of range", "allowed 1 to")),
    ("pi:nan", ("out of range",)),
    ("ssmax:0", ("ssmax's s must be above 0",)),
    ("yarn:x", ("not a number",)),
    ("dynamic:0.5", ("dynamic's factor f 0.5 is out of range", "allowed 1 to")),
    ("ntk-by-parts:x", ("ntk-by-parts's scale s 'x' is not a number",)),
    ("longrope:1x32/0.5x32", ("longrope's factor 0.5 is out of range", "allowed 1 to", "below 1")),
    ("longrope:1x32/abc", ("longrope's table has 'abc', not a factor", "joined by '/'", "1x32/2/4x31")),
    ("longrope:1x0", ("a count must be 1 or more",)),
    ("longrope:1x300", ("at most 256 factors",)),
    ("longrope:" + "1/" * 400 + "1", ("characters long: at most 600",)),
])
def test_a_bad_rule_is_one_clear_message(text: str, fragments: tuple[str, ...]) -> None:
    with pytest.raises(RuleError) as error:
        parse_rule(text)
    assert all(fragment in str(error.value) for fragment in fragments), str(error.value)


@pytest.mark.parametrize(("rule", "run_id", "fragments"), [
    ("pi", LEARNED, ("pi is not defined for learned", "rope, sinusoidal, alibi")),
    ("ntk", LEARNED, ("ntk rescales RoPE's base", "defined for rope")),
    ("log-n", LINEAR, ("linear attention has none", "softmax")),
    ("yarn", LINEAR, ("linear attention",)),
    ("dynamic", LEARNED, ("dynamic rescales RoPE's base", "defined for rope")),
    ("ntk-by-parts", LEARNED, ("ntk-by-parts interpolates RoPE's frequencies", "defined for rope")),
    ("longrope", LEARNED, ("longrope rescales RoPE's frequencies", "defined for rope")),
    ("longrope:1x32/4x31", ROPE, ("longrope's table has 63 factors", "heads are 128 wide, so it needs 64",
                                  "1x32/4x32")),
])
def test_an_undefined_pair_is_refused_before_any_work(presets, rule: str, run_id: str, fragments) -> None:
    run = presets[run_id]
    with pytest.raises(RuleError) as error:
        evaluate(run.model, run.config, [run.config.task.train_length], samples=8, rule=parse_rule(rule))
    assert all(fragment in str(error.value) for fragment in fragments), str(error.value)
    with pytest.raises(RuleError):
        predict(run.model, run.config, [run.config.task.train_length], rule=parse_rule(rule))


def test_the_command_line_refuses_an_undefined_pair_in_one_line_with_status_2() -> None:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["evaluate", LEARNED, "--rule", "pi", "--lengths", "16"], out, err)
    err = err.getvalue()
    assert status == 2 and not out.getvalue()
    assert err.count("\n") == 1 and err.startswith("lengen: error: pi is not defined for learned"), err


def test_the_command_line_prints_the_rows_with_the_rule() -> None:
    out = io.StringIO()
    status = cli.main(["evaluate", ROPE, "--rule", "ntk", "--rule-param", "4", "--lengths", "16,64", "--samples", "64",
                       "--horizon", "--json"], out, io.StringIO())
    assert status == 0
    result = json.loads(out.getvalue())
    assert result["rule"] == "ntk:4"
    assert [row["rule"] for row in result["lengths"]] == ["ntk:4", "ntk:4"]
    assert [row["length"] for row in result["lengths"]] == [16, 64]
    # under a rule the predicted horizon is looked for up to the longest length evaluated, and says so
    assert result["predicted_horizon_note"] == "under ntk:4, looked for up to the longest length evaluated, 64"
    assert result["predicted_horizon"] <= 64


def test_the_command_line_reads_a_longrope_table_and_a_dynamic_factor() -> None:
    out = io.StringIO()
    status = cli.main(["evaluate", ROPE, "--rule", "longrope", "--rule-param", "1/1x31/4x32", "--lengths", "16,64",
                       "--samples", "32", "--json"], out, io.StringIO())
    assert status == 0 and json.loads(out.getvalue())["rule"] == "longrope:1x32/4x32"
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["evaluate", ROPE, "--rule", "longrope", "--rule-param", "1x8", "--lengths", "16"], out, err)
    assert status == 2 and "longrope's table has 8 factors" in err.getvalue(), err.getvalue()
    out = io.StringIO()
    assert cli.main(["evaluate", ROPE, "--rule", "dynamic", "--rule-param", "3", "--lengths", "16",
                     "--samples", "32", "--json"], out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["rule"] == "dynamic:3"


def test_the_new_frequency_rules_change_nothing_within_the_training_length_and_act_beyond(presets) -> None:
    """dynamic and longrope are not applied up to L_train (transformers' dynamic and longrope read the
    original frequencies there), ntk-by-parts not at s = 1; beyond, each is a view with new frequencies."""
    run = presets[ROPE]
    L = run.config.task.train_length
    for label in ("dynamic", "dynamic:3", "longrope", "longrope:2x64", "ntk-by-parts", "ntk-by-parts:1"):
        assert under_rule(run.model, parse_rule(label), L) is run.model, label
    assert under_rule(run.model, make_rule("ntk-by-parts", 1.0), 8 * L) is run.model
    plain = run.model.encoding.frequencies
    for label in ("dynamic", "ntk-by-parts", "longrope", "longrope:2x64"):
        ruled = under_rule(run.model, parse_rule(label), 8 * L).encoding.frequencies
        assert ruled[0] == plain[0] or label == "longrope:2x64"  # the fastest pair stays unless the table moves it
        assert bool((ruled <= plain).all()) and bool(ruled[-1] < plain[-1])  # the slowest pair is slowed
    doubled = under_rule(run.model, parse_rule("longrope:2x64"), 8 * L).encoding.frequencies
    assert torch.allclose(doubled, plain / 2, rtol=1e-15, atol=0)  # a flat table is PI's frequencies


def test_pi_maps_every_position_of_a_longer_sequence_into_the_trained_range() -> None:
    """A few exact cases; tests/property/test_rule_positions.py draws many more."""
    rule = make_rule("pi")
    for length, train in ((17, 16), (1 << 20, 16), (100, 99), (4096, 7)):
        mapped = rule.map_positions(torch.arange(length), length, train)
        assert float(mapped.min()) == 0.0 and float(mapped.max()) < train
    inside = rule.map_positions(torch.arange(12), 12, 16)
    assert torch.equal(inside, torch.arange(12, dtype=torch.float64))  # within the training length: unchanged


def _outputs(model, config, length: int):
    out = last_query_outputs(model, config, length, samples=64, seed=5)
    return out.readout, out.target_mass, out.argmax_key


def test_ntk_at_scale_1_is_the_model_as_trained_bit_for_bit(presets) -> None:
    run = presets[ROPE]
    config, L = run.config, run.config.task.train_length
    ntk = make_rule("ntk", 1.0)
    for length in (L, 8 * L):
        view = under_rule(run.model, ntk, length)
        assert all(torch.equal(a, b) for a, b in zip(_outputs(view, config, length), _outputs(run.model, config, length)))
        tokens = torch.randint(config.task.vocab_size, (3, length), generator=torch.Generator().manual_seed(1))
        assert torch.equal(view(tokens), run.model(tokens))
    assert predict(run.model, config, [L, 8 * L], rule=ntk) == predict(run.model, config, [L, 8 * L])
    shift = presets[SHIFT]
    tokens = torch.randint(shift.config.task.vocab_size, (2, 64), generator=torch.Generator().manual_seed(2))
    assert torch.equal(under_rule(shift.model, ntk, 64)(tokens), shift.model(tokens))


def test_a_view_changes_nothing_in_the_shared_model(presets) -> None:
    run = presets[ROPE]
    before = {name: value.clone() for name, value in run.model.state_dict().items()}
    encoding = run.model.encoding
    for name in ("log-n", "pi", "ntk"):
        view = under_rule(run.model, make_rule(name), 128)
        assert view.encoding is not encoding and run.model.encoding is encoding
        assert view.W_Q is run.model.W_Q  # the weights are shared, not copied
    assert all(torch.equal(before[name], value) for name, value in run.model.state_dict().items())


def test_log_n_keeps_the_target_mass_at_8x_where_the_trained_run_loses_it(presets) -> None:
    run = presets[ROPE]
    config, L = run.config, run.config.task.train_length
    plain = evaluate(run.model, config, [L, 8 * L], samples=SAMPLES)
    ruled = evaluate(run.model, config, [L, 8 * L], samples=SAMPLES, rule=make_rule("log-n"))
    assert plain[1].target_mass < plain[0].target_mass - 3 * (plain[0].target_mass_sem + plain[1].target_mass_sem)
    assert ruled[1].target_mass >= ruled[0].target_mass
    assert ruled[0] == dataclasses.replace(plain[0], seconds=ruled[0].seconds, rule="log-n")  # 1×: nothing moves


def test_pi_moves_the_carrier_peak_from_k_to_k_times_s(presets) -> None:
    """PI reads the key at offset Δ as Δ/s: the logit the model gives offset k now sits at k·s."""
    from lengen_core.analysis.carrier import token_carriers

    run = presets[ROPE]
    k, L = run.config.task.offset, run.config.task.train_length
    s = 4
    plain = token_carriers(run.model, torch.arange(0, 64)).mean(dim=(0, 1))
    ruled = token_carriers(under_rule(run.model, make_rule("pi"), s * L), torch.arange(0, 64)).mean(dim=(0, 1))
    assert int(plain[:L].argmax()) == k
    assert int(ruled[: s * L].argmax()) == k * s
    assert torch.allclose(ruled[k * s], plain[k], atol=1e-9)


def test_rules_compose_with_heatmaps_and_full_sequence_evaluation(presets) -> None:
    run = presets[ROPE]
    L = run.config.task.train_length
    plain = attention_heatmap(run.model, run.config, 8 * L)
    ruled = attention_heatmap(under_rule(run.model, make_rule("log-n"), 8 * L), run.config, 8 * L)
    last = -1  # the last query: log-n sharpens its attention on the target key
    assert ruled.weights[last].max() > plain.weights[last].max()
    shift = presets[SHIFT]
    n = 4 * shift.config.task.train_length
    broken = evaluate_sequence(under_rule(shift.model, make_rule("pi"), n), shift.config, [n], samples=16)[0]
    kept = evaluate_sequence(under_rule(shift.model, make_rule("log-n"), n), shift.config, [n], samples=16)[0]
    assert kept.accuracy > 0.9 > broken.accuracy  # PI moves the target offset k to k·s: retrieval at k breaks


def _agreement(run, rules) -> dict[str, float]:
    config, L = run.config, run.config.task.train_length
    lengths = [L * m for m in MULTIPLES]
    gaps = {}
    for name in rules:
        rule = parse_rule(name)
        measured = evaluate(run.model, config, lengths, samples=SAMPLES, rule=rule)
        predicted = predict(run.model, config, lengths, rule=rule)
        gaps[name] = max(abs(m.accuracy - p.accuracy) for m, p in zip(measured, predicted))
    return gaps


def _defined(config: RunConfig) -> list[str]:
    names = []
    for name in RULES:
        try:
            make_rule(name).check(config)
        except RuleError:
            continue
        names.append(name)
    return names


@pytest.mark.slow
def test_each_rule_is_predicted_within_the_bound_on_the_default_config(presets) -> None:
    run = presets[ROPE]
    gaps = _agreement(run, _defined(run.config))
    assert set(gaps) == set(RULES)
    assert max(gaps.values()) <= BOUND, gaps


@pytest.mark.slow
@pytest.mark.parametrize("changes", with_trained_once(OTHER_CONFIGS), ids=lambda c: f"k{c['offset']}-V{c['vocab_size']}-L{c['train_length']}")
def test_each_rule_is_predicted_within_the_bound_on_other_configs(changes, trained) -> None:
    run = trained(**changes)
    assert run.config == with_changes(RunConfig(), **changes)
    gaps = _agreement(run, _defined(run.config))
    assert max(gaps.values()) <= BOUND, gaps
    assert not math.isnan(max(gaps.values()))


NEW_SETTINGS = ("dynamic:3", "ntk-by-parts:2", "longrope:1x16/1.5x16/3x16/6x16", "longrope:8x8/1x56")


@pytest.mark.slow
@pytest.mark.parametrize("changes", [None, *with_trained_once(OTHER_CONFIGS)],
                         ids=lambda c: "default" if c is None else f"k{c['offset']}-V{c['vocab_size']}-L{c['train_length']}")
def test_the_new_rules_at_chosen_settings_are_predicted_within_the_bound(changes, trained, presets) -> None:
    """dynamic, ntk-by-parts and longrope away from their defaults (which the tests above cover): a factor
    3, a fixed s = 2 (so it acts within L_train too), a rising table and a table that slows the fastest
    pairs, on the default preset and the two other configs."""
    run = presets[ROPE] if changes is None else trained(**changes)
    gaps = _agreement(run, NEW_SETTINGS)
    assert max(gaps.values()) <= BOUND, gaps


@pytest.mark.parametrize("encoding", ["sinusoidal", "alibi"])
def test_pi_reads_a_sinusoidal_table_and_an_alibi_bias_at_the_interpolated_positions(encoding: str) -> None:
    """The other encodings PI is defined for: the sinusoidal table is read at p·L_train/L and ALiBi's
    bias at the interpolated distances; the last-query evaluation and its prediction run under it."""
    from lengen_core.models.encodings import sinusoidal_table
    from lengen_core.models.initial import initial_model

    config = with_changes(RunConfig(), encoding=encoding)
    model = initial_model(config)
    L = config.task.train_length
    length, s = 4 * L, 4.0
    view = under_rule(model, make_rule("pi"), length)
    positions = torch.arange(length)
    if encoding == "sinusoidal":
        expected = sinusoidal_table(positions.to(torch.float64) / s, config.model.d_model)
        assert torch.allclose(view.encoding.embed(positions), expected, atol=1e-6)
        assert not torch.allclose(view.encoding.embed(positions), model.encoding.embed(positions))
    else:
        last = torch.tensor([length - 1])
        assert torch.allclose(view.encoding.bias(last, positions), model.encoding.bias(last, positions) / s, atol=1e-5)
    measured = evaluate(model, config, [L, length], samples=32, rule=make_rule("pi"))
    predicted = predict(model, config, [L, length], rule=make_rule("pi"))
    assert measured[0] == dataclasses.replace(evaluate(model, config, [L], samples=32)[0], seconds=measured[0].seconds,
                                              rule="pi")  # within the training length: the model as trained
    assert all(0.0 <= p.accuracy <= 1.0 and 0.0 <= p.target_mass <= 1.0 for p in predicted)

"""Readouts that read right (issue 26): run labels that lead with what differs, the 1/p caption that calls a
slope near 1 the dilution regime only where the law holds, the Dilution headline that agrees with its
slider or says why not, rules that explain themselves, and a sweep's run that opens on its pages."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from lengen.presets import PRESETS, preset_ids
from lengen_core.analysis.fit import FitResult
from lengen_core.analysis.rules import RULES
from lengen_core.config import RunConfig, with_changes
from ui.captions.readouts import inverse_mass_caption, longest_note
from ui.rules.select import EXPLANATIONS, RULES_DOCUMENT
from ui.runs import run_labels
from ui.sweep_panels import preset_result

APP = str(Path(__file__).resolve().parents[2] / "app.py")
BASE = with_changes(RunConfig(), offset=5, seed=0, steps=30)


def labels_of(monkeypatch, *configs: RunConfig) -> list[str]:
    stored = {c.run_id(): c for c in configs}
    monkeypatch.setattr("ui.runs.stored_configs", lambda: stored)
    labels = run_labels([*stored, preset_ids()["RoPE"]])
    return [labels[c.run_id()] for c in configs]


@pytest.mark.parametrize("change", [dict(seed=1), dict(offset=7), dict(train_length=32), dict(vocab_size=8),
                                    dict(encoding="learned")])
def test_runs_that_differ_in_one_setting_differ_in_their_first_characters(monkeypatch, change) -> None:
    first, second = labels_of(monkeypatch, BASE, with_changes(BASE, **change))
    assert first[:30] != second[:30], (first, second)
    for label in (first, second):
        assert "×1" not in label and "0×" not in label  # no cryptic layers×heads
        assert len(label.split(" · #")[0]) <= 40, label  # what tells them apart fits a narrow picker


def test_a_label_names_layers_and_heads_in_words_only_where_they_differ(monkeypatch) -> None:
    single, shift = labels_of(monkeypatch, BASE, with_changes(BASE, task="shift", n_layers=1, n_heads=2))
    assert single.startswith("retrieval, single head · RoPE k=5 L=16")
    assert shift.startswith("shift, 1 layer × 2 heads · RoPE k=5 L=16")
    lone, = labels_of(monkeypatch, BASE)
    assert lone.startswith("RoPE k=5 L=16 · #")  # alone: what it is, nothing it shares with no one


def fit(status: str) -> FitResult:
    return FitResult(status, None, "No law: this run is at chance past its training length (0.062 at 32), so there "
                     "is no decay to fit.")


def test_the_inverse_mass_caption_calls_slope_one_the_dilution_regime_only_with_a_law() -> None:
    lengths = [16, 32, 64, 128, 256]
    masses = list(0.9 * 16 / np.asarray(lengths, dtype=float))  # p ∝ 1/L: slope 1 on log–log axes
    at_chance = inverse_mass_caption(lengths, masses, 16, fit("at_chance"))
    assert "the dilution regime" not in at_chance and "no dilution regime" in at_chance
    assert "at chance past its training length" in at_chance and "1.00 between 128 and 256" in at_chance


def test_the_longest_length_note_agrees_with_the_slider_or_says_why() -> None:
    assert longest_note(16, 65_536, [16, 32, 65_536], [16, 32, 65_536], None) is None
    doubled = longest_note(24, 65_536, [24, 48, 49_152], [24, 48, 49_152], None)
    assert doubled == ("Measured up to L = 49,152, not the 65,536 asked for: the lengths double from the training "
                       "length 24, and the next doubling, 98,304, is past 65,536.")
    table = longest_note(16, 65_536, [16, 4_096, 8_192, 65_536], [16, 4_096], "length 8192 is beyond the learned "
                         "position table, which covers lengths up to 4096 (positions 0–4095); choose a length ≤ 4096")
    assert table.startswith("Measured up to L = 4,096, not the 65,536 asked for: 2 longer lengths cannot be tested")
    assert "beyond the learned position table, which covers lengths up to 4096" in table


def metric_labels(app: AppTest) -> list[str]:
    return [m.label for m in app.metric]


def captions(app: AppTest) -> str:
    return " ".join(c.value for c in app.caption).replace("\\", "")


@pytest.fixture(scope="module")
def learned_dilution() -> AppTest:
    """The Learned (APE) preset on the Dilution page at its default longest length, 65,536."""
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.sidebar.selectbox(key="_run_picker").set_value(preset_ids()["Learned (APE)"]).run()
    app.switch_page("pages/dilution.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_a_learned_runs_dilution_page_says_why_its_headline_is_short_of_the_slider(learned_dilution) -> None:
    app = learned_dilution
    end = PRESETS["Learned (APE)"].model.max_positions
    assert app.select_slider(key="dilution-longest").value == 65_536
    assert f"Accuracy at L = {end:,} (longest measured)" in metric_labels(app)
    assert f"Measured up to L = {end:,}, not the 65,536 asked for" in captions(app)
    assert "beyond the learned position table" in captions(app)


def test_a_learned_run_at_chance_is_not_said_to_be_in_a_dilution_regime(learned_dilution) -> None:
    text = captions(learned_dilution)
    assert "No law" in text
    assert "(near 1: the dilution regime" not in text


@pytest.mark.slow
def test_a_rope_runs_headline_is_the_sliders_length() -> None:
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.switch_page("pages/dilution.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert "Accuracy at L = 65,536" in metric_labels(app)
    assert "not the 65,536 asked for" not in captions(app)


def plain_words(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\\", ""))


def test_every_rule_says_what_it_does_and_when_it_helps_in_the_docs_words() -> None:
    assert set(EXPLANATIONS) == set(RULES) - {"none"}
    document = plain_words(RULES_DOCUMENT.read_text(encoding="utf-8"))
    for name, sentence in EXPLANATIONS.items():
        assert sentence in document, name  # docs/rules.md says the same words
        assert "helps" in sentence and sentence.endswith("."), name


@pytest.mark.slow
def test_the_rule_selectors_help_and_captions_give_each_rules_sentence() -> None:
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.switch_page("pages/dilution.py").run()
    selector = app.multiselect(key="dilution-rules")
    for name, sentence in EXPLANATIONS.items():
        if name in selector.options:
            assert sentence in plain_words(selector.help), name
    assert "Applied at evaluation, nothing retrained" not in selector.help
    assert any(e.label == "How the rules work (docs/rules.md)" for e in app.expander)
    selector.set_value(["log-n"]).run()
    assert f"log-n** ({RULES['log-n'].summary}): {EXPLANATIONS['log-n']}" in captions(app)


def sweep_page() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.switch_page("pages/sweeps.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_a_sweeps_stored_run_opens_on_the_dilution_page() -> None:
    rope = preset_ids()["RoPE"]  # the preset sweep's RoPE k = 3, seed 0 cell is the RoPE preset
    assert rope in {c["run_id"] for c in preset_result().cells}
    app = sweep_page()
    app.selectbox(key="sweep-open-run").set_value(rope).run()
    app.button(key="sweep-open-Dilution").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.session_state["run_id"] == rope
    assert app.title[0].value.startswith("Accuracy against length")


def test_a_sweeps_run_that_is_not_stored_says_so_and_goes_to_the_train_form() -> None:
    cells = preset_result().cells
    absent = next(c for c in cells if c["encoding"] == "rope" and c["offset"] == 5 and c["seed"] == 2)
    app = sweep_page()
    app.selectbox(key="sweep-open-run").set_value(absent["run_id"]).run()
    assert not [b for b in app.button if b.key == "sweep-open-Dilution"]  # no link that would open nothing
    assert f"Run `{absent['run_id']}` is not stored here" in " ".join(i.value for i in app.info)
    app.button(key="sweep-train").click().run()
    assert app.session_state["link_config"].run_id() == absent["run_id"]
    assert app.title[0].value == "Train a run"


def test_a_horizon_at_the_probes_ceiling_is_drawn_as_a_bound_not_a_measured_point() -> None:
    from ui.charts.common import probe_curve

    probes = pd.DataFrame({"probe_step": [50, 100, 150, 200], "horizon": [300, 800, 1024, 1024],
                           "m_out": [7.077, 7.5, 7.8, 7.832]})
    figure = probe_curve(probes, 200, 16)  # the ceiling: 64 × 16 = 1,024 tokens
    line = next(t for t in figure.data if t.name == "predicted horizon")
    assert list(line.y[:2]) == [300 / 16, 800 / 16] and all(np.isnan(line.y[2:]))  # not a flat line at the ceiling
    bound = next(t for t in figure.data if t.name.startswith("≥ 1,024"))
    assert list(bound.x) == [150, 200] and list(bound.y) == [64, 64] and list(bound.text) == ["≥", "≥"]
    assert bound.marker.symbol == "triangle-up-open"
    assert figure.layout.yaxis2.tickmode == "auto"  # m_out's own ticks, not two synced to the log axis
    low, high = figure.layout.yaxis.range
    assert low <= 0 and high >= np.log10(64)  # 1× and 10× labelled on the horizon's axis


def test_the_chance_line_is_labelled_outside_the_plot() -> None:
    from ui.charts.common import dilution

    table = pd.DataFrame({"length": [16, 32], "samples": [64, 64], "accuracy": [1.0, 0.07],
                          "accuracy_low": [0.95, 0.03], "accuracy_high": [1.0, 0.15], "target_mass": [0.9, 0.05],
                          "target_mass_sem": [0.01, 0.01], "predicted_accuracy": [1.0, 0.06],
                          "predicted_mass": [0.9, 0.05]})
    figure = dilution(table, None, 1 / 16)
    label = next(a for a in figure.layout.annotations if a.text.startswith("chance"))
    assert (label.xref, label.x, label.xanchor) == ("x domain", 1, "left")  # right of the plot, over no data
    assert figure.layout.margin.r >= 90
    from ui.widgets import present_figure

    present_figure(figure, 480)  # a lesson on a projector: tight margins, but the label keeps its own
    assert figure.layout.margin.r >= 90
    unlabelled = go.Figure(go.Scatter(x=[1, 2], y=[1, 0]), layout=dict(margin=dict(r=96)))
    present_figure(unlabelled, 480)
    assert unlabelled.layout.margin.r == 10


@pytest.mark.slow
def test_a_sweeps_stored_runs_open_together_on_the_compare_page() -> None:
    stored = [preset_ids()["RoPE"], preset_ids()["Learned (APE)"]]  # the sweep's two cells that are presets
    app = sweep_page()
    app.selectbox(key="sweep-open-run").set_value(stored[0]).run()
    app.button(key="sweep-open-Compare").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.title[0].value == "Compare runs"
    assert app.multiselect(key="compare-runs").value == stored

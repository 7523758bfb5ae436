"""Runs are told apart by id: look-alike runs get different labels, and no page or rerun changes the
selected run. Two look-alikes: a 1-layer, 2-head shift run and a single-head retrieval run, both
RoPE, k = 5, L = 16, seed 0, whose labels used to be the same string (a selector's value travels by
label, so opening the shift run and changing page selected the retrieval run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.share import config_to_query
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from ui.runs import run_labels, run_options

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGES = ["pages/start.py", "pages/train.py", "pages/attention.py", "pages/carrier.py", "pages/dilution.py",
         "pages/compare.py", "pages/transformer.py", "pages/theory.py"]
RETRIEVAL = with_changes(RunConfig(), offset=5, train_length=16, seed=0, steps=30)
SHIFT = with_changes(RETRIEVAL, task="shift", n_layers=1, n_heads=2)


@pytest.fixture(scope="module")
def look_alikes() -> dict[str, str]:
    """Both runs in the person's store, the retrieval run first (so the shift run is listed first)."""
    store = RunStore()
    ids = {}
    for name, config in (("retrieval", RETRIEVAL), ("shift", SHIFT)):
        if not store.exists(config.run_id()):
            store.save(train(config, "cpu"))
        ids[name] = config.run_id()
    return ids


def test_look_alike_runs_have_different_labels_that_say_how_they_differ(look_alikes) -> None:
    labels = run_labels(run_options())
    shift, retrieval = labels[look_alikes["shift"]], labels[look_alikes["retrieval"]]
    assert shift != retrieval
    assert "shift, 1 layer × 2 heads" in shift and "retrieval, single head" in retrieval
    for run_id, label in ((look_alikes["shift"], shift), (look_alikes["retrieval"], retrieval)):
        assert "k=5" in label and "L=16" in label and label.endswith(f"#{run_id.rsplit('-', 1)[-1][:6]}")
    assert len(set(labels.values())) == len(labels)  # every option, presets included
    assert labels[RunConfig().run_id()] == "Preset: RoPE"


def test_labels_that_would_collide_fall_back_to_the_whole_id(monkeypatch, look_alikes) -> None:
    shift = look_alikes["shift"]
    twin = shift[:-6] + "zzzzzz"  # the same first six characters of the hash
    configs = {shift: SHIFT, twin: SHIFT}
    monkeypatch.setattr("ui.runs.stored_configs", lambda: configs)
    labels = run_labels([shift, twin])
    assert labels[shift].endswith(f"#{shift}") and labels[twin].endswith(f"#{twin}")


def test_every_page_keeps_the_run_opened_by_link(look_alikes) -> None:
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update(config_to_query(SHIFT))
    app.run()
    shift = look_alikes["shift"]
    assert app.session_state["run_id"] == shift
    for page in PAGES:
        app.switch_page(page).run()
        assert not app.exception, (page, [e.value for e in app.exception])
        assert app.session_state["run_id"] == shift, page
        assert f"Run id: `{shift}`" in [c.value for c in app.sidebar.caption], page
        assert app.sidebar.selectbox(key="_run_picker").value == shift, page
    app.run()  # and a plain rerun
    assert app.session_state["run_id"] == shift


def test_choosing_another_run_is_what_changes_it(look_alikes) -> None:
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update(config_to_query(SHIFT))
    app.run()
    app.sidebar.selectbox(key="_run_picker").set_value(look_alikes["retrieval"]).run()
    assert app.session_state["run_id"] == look_alikes["retrieval"]
    app.switch_page("pages/carrier.py").run()
    assert app.session_state["run_id"] == look_alikes["retrieval"]
    assert app.query_params["task"] == "retrieval"


def test_a_link_naming_a_run_opens_that_run_even_beside_another_runs_settings(look_alikes) -> None:
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({**config_to_query(RETRIEVAL), "run": look_alikes["shift"]})
    app.run()
    assert app.session_state["run_id"] == look_alikes["shift"]
    assert not app.warning
    assert app.query_params["task"] == "shift"  # the address bar now describes the run shown


def test_a_link_naming_an_absent_run_beside_settings_says_so_and_opens_the_settings_run(look_alikes) -> None:
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({**config_to_query(SHIFT), "run": "rope-softmax-shift-s0-000000000000"})
    app.run()
    assert app.session_state["run_id"] == look_alikes["shift"]
    assert "names the run 'rope-softmax-shift-s0-000000000000', which is not stored here; its settings were used" in \
        " ".join(w.value for w in app.warning).replace("\\", "")

"""The horizon on Dilution (measured and predicted) and Train longer: a link to the Train form for a run
that continues the selected one, which trains from its weights and records its parent."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from lengen.lineage import continuation
from lengen.presets import dilution_lengths, preset_ids
from lengen.share import config_to_query
from lengen.store import RunStore, preset_store
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import train
from tests.helpers.waiting import wait_for
from ui.runs import measurement
from ui.training.pool import training_pool

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ROPE = preset_ids()["RoPE"]


def open_page(page: str, params: dict[str, str] | None = None, run_id: str | None = None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    if run_id is not None:
        app.session_state["run_id"] = run_id
    app.run()
    app.switch_page(page)
    if params is not None:
        app.query_params.clear()
        app.query_params.update(params)
    return app.run()


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def test_dilution_shows_the_measured_and_predicted_horizon_of_the_run(monkeypatch):
    app = open_page("pages/dilution.py", {"run": ROPE, "longest": "65536", "samples": "256"})  # shipped
    assert not app.exception, [e.value for e in app.exception]
    shown = metrics(app)
    config = preset_store().load(ROPE).config
    predicted = measurement(ROPE, dilution_lengths(config, 65536), 256).predicted_horizon  # the page's request
    assert shown["Horizon, predicted"] == f"{predicted.length:,}"  # 8,674 on this preset (179 at the old default)
    measured = shown["Horizon, measured"]
    assert measured in {"4,096", "8,192"}, measured  # 0.945 at 8,192, 0.566 at 16,384: the doubling before the fall
    caption = " ".join(c.value for c in app.caption if c.value.startswith("**Horizon**"))
    assert f"{predicted.length:,} tokens" in caption and "below at" in caption
    assert "between the two measured lengths" in caption or "disagree" in caption
    links = [p for p in app.get("page_link") if p.proto.label == "Train longer"]
    assert len(links) == 1


def test_train_longer_opens_the_form_for_a_continuation_and_trains_from_the_weights():
    parent = preset_store().load(ROPE)
    child = continuation(parent.config, 40)
    app = open_page("pages/train.py", config_to_query(child))
    assert not app.exception, [e.value for e in app.exception]
    assert any(f"continues `{ROPE}`" in i.value for i in app.info)
    {n.label: n for n in app.number_input}["Steps"].set_value(40)
    app.button[0].click().run()
    ticket, pool = app.session_state["training_ticket"], training_pool()
    wait_for(lambda: pool.status(ticket).state not in ("queued", "running"), timeout=120)
    app.run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert app.session_state["run_id"] == child.run_id()
    stored = RunStore().load(child.run_id())
    assert stored.config.train.continues == ROPE and stored.config.train.keep_training
    assert stored.history["loss"][0] < 0.1  # from the preset's weights; a fresh start is at ln 16 = 2.8
    probed = stored.history["probe_step"]  # the pool probes a single head live, when a probe fits its cost rule
    captions = " ".join(c.value for c in app.caption)
    if probed:
        assert stored.history["horizon"][-1] is not None and "took" in captions
    else:  # 40 steps may leave no room for one: the page says so
        assert "was not probed while it trained" in captions


def test_a_constructed_run_says_it_was_built_not_trained_and_reaches_the_end_of_its_table():
    config = with_changes(RunConfig(), encoding="learned", init="constructed", steps=0, max_positions=1024)
    RunStore().save(train(config, "cpu"))
    app = open_page("pages/dilution.py", {"run": config.run_id(), "longest": "1024", "samples": "128"})
    assert not app.exception, [e.value for e in app.exception]
    summary = next(c.value for c in app.caption if c.value.startswith("Run `"))
    assert "built by hand to implement the relative rule, not trained" in summary and "nan" not in summary
    shown = metrics(app)
    assert shown["Horizon, predicted"] == "1,024" and shown["Horizon, measured"] == "≥ 1,024"

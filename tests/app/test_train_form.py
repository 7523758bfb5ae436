"""The Train form carries every main setting, the query-key init scale among them: choosing the old
default (d_model 64, qk_init 1.0) in the form asks for the run the old default made."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from lengen_core.config import RunConfig, with_changes

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_the_form_sets_the_query_key_init_scale():
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py").run()
    inputs = {n.label: n for n in app.number_input}
    assert inputs["Query-key init scale"].value == RunConfig().model.qk_init == 0.1
    inputs["Query-key init scale"].set_value(1.0)
    inputs["Model width d_model"].set_value(64)
    inputs["Steps"].set_value(7)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    app.button[0].click().run()  # the pool takes it; the ticket names the run the form describes
    ticket = app.session_state["training_ticket"]
    from ui.training.pool import training_pool

    status = training_pool().status(ticket)
    assert status.run_id == with_changes(RunConfig.legacy_defaults(), steps=7).run_id()
    training_pool().stop(ticket)


def _form_values(app: AppTest) -> dict:
    widgets = [*app.number_input, *app.selectbox, *app.radio, *app.checkbox]
    return {w.key: w.value for w in widgets if w.key and w.key.startswith("train-")}


def test_the_form_keeps_its_values_across_every_page():
    """Streamlit drops a widget's state on any run that does not draw it: the form must not come back
    at its minimums (offset 1, steps 0) after a visit to another page."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py").run()
    inputs = {n.label: n for n in app.number_input}
    inputs["Offset k"].set_value(5)
    inputs["Steps"].set_value(123)
    inputs["Vocabulary V"].set_value(24)
    next(s for s in app.selectbox if s.label == "Positional encoding").set_value("learned")
    app.checkbox(key="train-start-paused").check()
    app.number_input(key="train-pace").set_value(12.5)
    app.run()
    chosen = _form_values(app)
    assert chosen["train-offset"] == 5 and chosen["train-encoding"] == "learned"
    assert chosen["train-start-paused"] is True and chosen["train-pace"] == 12.5
    for page in ("start", "attention", "carrier", "dilution", "compare", "sweeps", "transformer", "theory"):
        app.switch_page(f"pages/{page}.py").run()
        assert not app.exception, (page, [e.value for e in app.exception])
        app.switch_page("pages/train.py").run()
        assert _form_values(app) == chosen, page
        assert not any("Not a valid configuration" in w.value for w in app.warning), page


def test_the_estimate_states_its_bounds_and_the_pace_and_a_bad_pace_is_a_message():
    """Issue 26: the estimate is this server's measured step time, the most a run takes (all its steps) and the
    least (early stopping needs `patience` steps), at the pace chosen; a pace the core refuses says what is allowed."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py").run()
    caption = " ".join(c.value for c in app.caption if c.value.startswith("Estimated"))
    # measured by the training process, or in its first seconds the cost model's figure, saying so (test_train_speed.py)
    assert "from its measured speed" in caption or "not measured yet" in caption
    assert "at most" in caption and "for all 1,500 steps" in caption
    assert "no sooner than" in caption and "held at 100% for 200 steps" in caption
    app.number_input(key="train-pace").set_value(1.0)  # slower than any step of the default run
    app.run()
    caption = " ".join(c.value for c in app.caption if c.value.startswith("Estimated"))
    assert "at most 1 a second (the pace sets the time)" in caption and "at most 25 min for all 1,500 steps" in caption
    assert "no sooner than 3.3 min" in caption  # 200 steps at 1 a second
    app.number_input(key="train-pace").set_value(0.1)  # the widget allows it; the core does not
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    warning = " ".join(w.value for w in app.warning).replace("\\", "")  # markdown escapes
    assert "Not a valid pace: steps per second must be 0 (as fast as possible) or a number from 0.2 to 1,000" in warning
    next(b for b in app.button if b.label == "Train").click().run()
    assert "training_ticket" not in app.session_state
    assert "Cannot train at this pace" in " ".join(e.value for e in app.error)


def _train_page(params: dict | None = None) -> AppTest:
    """The Train page, opened from a link with `params` (a reload or a shared link), or from Start."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py")
    app.query_params.update(params or {})
    return app.run()


def test_the_form_follows_a_link_to_a_stored_run_and_the_run_picked_in_the_sidebar():
    """Issue 40: `/train?…encoding=learned&seed=…` showed rope / seed 0 while the sidebar said the learned run;
    picking another run in the sidebar left the form as it was."""
    from lengen.presets import PRESETS, preset_ids
    from lengen.share import config_to_query

    learned = PRESETS["Learned (APE)"]
    app = _train_page(config_to_query(learned))
    assert not app.exception, [e.value for e in app.exception]
    values = _form_values(app)
    assert values["train-encoding"] == "learned" and values["train-seed"] == learned.train.seed
    assert values["train-length"] == learned.task.train_length and values["train-qk-init"] == learned.model.qk_init
    linear = PRESETS["RoPE + linear attention"]
    app.selectbox(key="_run_picker").set_value(preset_ids()["RoPE + linear attention"]).run()
    values = _form_values(app)
    assert values["train-attention"] == "linear" and values["train-encoding"] == linear.model.encoding
    app.number_input(key="train-offset").set_value(5).run()  # a person's edit outlives a visit elsewhere
    app.switch_page("pages/dilution.py").run()
    app.switch_page("pages/train.py").run()
    assert _form_values(app)["train-offset"] == 5 and _form_values(app)["train-attention"] == "linear"


def test_settings_that_name_a_stored_run_say_so_and_offer_a_seed_of_ones_own():
    """Issue 40: a newcomer pressing Train on the defaults got 'already trained' and had to guess that the seed
    must change. The form says that Train opens the stored run, and one click takes a seed not trained here."""
    app = _train_page()
    config_seed = _form_values(app)["train-seed"]
    notice = " ".join(i.value for i in app.info)
    assert "already trained here" in notice and "Train opens that run" in notice, notice
    offer = next(b for b in app.button if b.key == "train-new-seed")
    offer.click().run()
    assert not app.exception, [e.value for e in app.exception]
    seed = _form_values(app)["train-seed"]
    assert seed > config_seed
    assert "already trained here" not in " ".join(i.value for i in app.info)  # these settings are new now
    assert not any(b.key == "train-new-seed" for b in app.button)
    app.number_input(key="train-steps").set_value(3).run()
    next(b for b in app.button if b.label == "Train").click().run()
    ticket = app.session_state["training_ticket"]  # the pool took it: a stored run opens without a ticket
    from ui.training.pool import training_pool

    status = training_pool().status(ticket)
    assert f"-s{seed}-" in status.run_id  # (3 steps: it may be done and stored by now)
    training_pool().stop(ticket)

"""A lesson's live training, as a class sees it (AppTest, the shared pool's child process): paused before its
first step it already draws the untrained model (carrier, map and the horizon at step 0); when it ends its
last frame stays with the run's verdict and one button that opens the run on its page, in presenter mode
from presenter mode; the session remembers the runs it trained."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.waiting import wait_for

APP = str(Path(__file__).resolve().parents[2] / "app.py")
wait_for = functools.partial(wait_for, timeout=120.0)
LESSON = """title = "Live"
summary = "One tiny training."
[[steps]]
title = "Train it"
text = "Train a tiny head."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
seed = {seed}
steps = 60
start_paused = true
"""


def lesson_app(tmp_path, monkeypatch, seed: int, present: bool) -> AppTest:
    (tmp_path / "live.toml").write_text(LESSON.format(seed=seed), encoding="utf-8")
    monkeypatch.setattr("ui.lessons.files.LESSON_ROOT", tmp_path)
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({"lesson": "live", "step": "1", **({"present": "1"} if present else {})})
    return app.run()


def chart_specs(app: AppTest) -> list[str]:
    return [c.proto.spec for c in app.get("plotly_chart")]


@pytest.mark.slow  # a training of 60 steps in the pool's child process; quick representative: test_live_probe
def test_paused_training_draws_the_untrained_model_and_its_last_frame_stays_with_the_verdict(tmp_path, monkeypatch):
    from ui.training.pool import training_pool

    app = lesson_app(tmp_path, monkeypatch, seed=5301, present=True)
    next(b for b in app.button if b.label == "Train").click().run()
    ticket = app.session_state["training_ticket"]
    pool = training_pool()
    try:
        wait_for(lambda: pool.status(ticket).paused)
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        assert pool.status(ticket).progress is None  # nothing trained yet ...
        specs = chart_specs(app)  # ... and the four charts already drawn, from the untrained model
        assert len(specs) == 4, len(specs)
        shown = " ".join(c.value for c in app.caption)
        assert "before the first step (the untrained model)" in shown
        assert "every few dozen steps the weights predict how far the run reaches: at step 0" in shown
        assert all('"height":300' in spec.replace(" ", "") for spec in specs)  # projector-sized, 2 by 2
        assert not any(b.help for b in app.button if b.key in ("step-training", "resume-training"))  # no tooltip over the status
        app.button(key="resume-training").click().run()
        wait_for(lambda: pool.status(ticket).state not in ("queued", "running"))
        app.run()  # the fragment sees the end, keeps the frame and redraws the app
        app.run()
    finally:
        with contextlib.suppress(KeyError):  # released once it ended
            pool.stop(ticket)
    assert not app.exception, [e.value for e in app.exception]
    assert "training_ticket" not in app.session_state
    run_id = app.session_state["run_id"]
    assert run_id in app.session_state["trained_here"]
    assert len(chart_specs(app)) == 4  # the last frame stays
    done = [s.value for s in [*app.success, *app.warning]]
    assert any(text.startswith("**Finished at step") and "accuracy" in text for text in done), done
    opened = app.button(key="lesson-open-run")
    assert opened.label == "Open on Dilution"
    opened.click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.session_state["run_id"] == run_id
    assert app.query_params.get("present") in ("1", ["1"])  # still presenter mode on Dilution


def test_the_class_runs_step_draws_the_presets_and_says_none_was_trained_yet():
    """The class-runs element on a fresh session: the presets drawn, and a caption that says how a run gets there."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({"lesson": "why-rope-generalises", "step": "4"})
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    [spec] = chart_specs(app)
    assert "Your runs beside the presets" in spec and '"name":"RoPE"' in spec.replace(" ", "")
    assert "No run trained here in this session yet" in " ".join(c.value for c in app.caption)


def test_the_class_runs_step_draws_a_run_trained_in_this_session_beside_the_presets():
    """A run the session trained (here the linear-attention preset, listed as if trained in this session: same task,
    a single head) is drawn under its encoding and seed beside the presets."""
    from lengen.presets import PRESETS

    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({"lesson": "why-rope-generalises", "step": "4"})
    app.session_state["trained_here"] = [PRESETS["RoPE + linear attention"].run_id()]
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    spec = chart_specs(app)[0].replace(" ", "")
    assert '"name":"yours:rope,seed0"' in spec and '"name":"Learned(APE)"' in spec
    assert "No run trained here" not in " ".join(c.value for c in app.caption)

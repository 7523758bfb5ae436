"""The Train page's Pause, Step, 10 steps and Resume on a live training (the shared pool's child process):
a press of Step moves the run exactly one step, and a paused run shows its carrier and map at 4×."""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.helpers.waiting import wait_for

APP = str(Path(__file__).resolve().parents[2] / "app.py")


wait_for = functools.partial(wait_for, timeout=120.0)  # this module's trainings' deadline


def trained_from_the_train_page(pace: float | None = None, **numbers: int) -> AppTest:
    """A session on the Train page that set these number inputs (by label), the pace in steps/s if given, and
    pressed Train."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py").run()
    inputs = {n.label: n for n in app.number_input}
    for label, value in numbers.items():
        inputs[label].set_value(value)
    if pace is not None:
        app.number_input(key="train-pace").set_value(pace)
    app.run()
    next(b for b in app.button if b.label == "Train").click().run()
    return app


def test_pause_step_and_resume_from_the_train_page():
    from ui.training.pool import training_pool

    app = trained_from_the_train_page(Seed=41)
    ticket = app.session_state["training_ticket"]
    pool = training_pool()
    try:
        wait_for(lambda: pool.status(ticket).progress is not None)  # it has taken a step
        app.run()
        app.button(key="pause-training").click().run()
        assert pool.status(ticket).paused
        wait_for(lambda: (view := pool.status(ticket).view) is not None and view.step == pool.status(ticket).progress.step)
        before = pool.status(ticket).progress.step
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        assert app.button(key="resume-training") and not app.button(key="step-training").disabled
        charts = [c.proto.spec for c in app.get("plotly_chart")]
        assert any("Carrier" in spec or "s(Δ)" in spec for spec in charts) and len(charts) >= 3
        assert f"At step {before}:" in " ".join(c.value for c in app.caption)
        app.button(key="step-training").click().run()
        wait_for(lambda: pool.status(ticket).progress.step == before + 1)
        time.sleep(0.5)
        assert pool.status(ticket).progress.step == before + 1 and pool.status(ticket).paused
        app.run()  # the live view refreshes by itself every half second
        assert f"paused at step {before + 1}/" in " ".join(str(p.proto.text) for p in app.get("progress"))
        app.button(key="step10-training").click().run()
        wait_for(lambda: pool.status(ticket).progress.step == before + 11)
        time.sleep(0.5)
        assert pool.status(ticket).progress.step == before + 11
        app.run()
        app.button(key="resume-training").click().run()
        assert not pool.status(ticket).paused
    finally:
        pool.stop(ticket)


def test_a_paused_transformer_shows_its_carrier_head():
    """A transformer has no carrier from the weights: the live view names the head putting most weight on
    t − k and draws its measured s(Δ) and its map, at the step where the run paused."""
    from ui.training.pool import training_pool

    app = trained_from_the_train_page(Layers=2, Heads=2, Seed=43)
    ticket = app.session_state["training_ticket"]
    pool = training_pool()
    try:
        wait_for(lambda: pool.status(ticket).progress is not None)
        app.run()
        app.button(key="pause-training").click().run()
        wait_for(lambda: (view := pool.status(ticket).view) is not None and view.step == pool.status(ticket).progress.step)
        view = pool.status(ticket).view
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        layer, head = view.head
        captions = " ".join(c.value for c in app.caption)
        assert f"s(Δ) of head L{layer}H{head}, the head putting most weight on t − k now" in captions
        assert f"At step {view.step}:" in captions
    finally:
        pool.stop(ticket)


def test_a_second_browser_on_the_same_run_watches_and_can_leave_without_stopping_it():
    """Two sessions press Train on the same settings (a class on one link): one training; the second sees it
    live with the controls disabled and a Leave button that lets go of it while it goes on for the first."""
    from ui.training.pool import training_pool

    # paced at 2 steps/s, so it is still running when the second leaves: unpaced, it learned the task and stopped
    # early (about 100 steps, a fraction of a second) before the second's Leave on a loaded machine (2026-12-04)
    first = trained_from_the_train_page(pace=2.0, Seed=61)
    second = trained_from_the_train_page(pace=2.0, Seed=61)
    pool = training_pool()
    tickets = first.session_state["training_ticket"], second.session_state["training_ticket"]
    try:
        assert pool.status(tickets[0]).run_id == pool.status(tickets[1]).run_id  # one training, two holders
        wait_for(lambda: pool.status(tickets[0]).progress is not None)
        second.run()
        assert not second.exception, [e.value for e in second.exception]
        assert second.button(key="pause-training").disabled and second.button(key="step-training").disabled
        assert "shared with 1 other request for the same run" in " ".join(c.value for c in second.caption)
        second.button(key="leave-training").click().run()
        assert "training_ticket" not in second.session_state
        assert "You left the shared training" in " ".join(i.value for i in second.info)
        assert pool.status(tickets[0]).state == "running" and pool.status(tickets[0]).holders == 1
        first.run()
        assert not first.button(key="pause-training").disabled
    finally:
        pool.stop(tickets[0])


def test_a_training_started_paused_waits_for_step_or_resume():
    """Start paused: the run takes no step until told, says so, and Step takes exactly one; the pace chosen in
    the form is the pool's and the progress line says it."""
    from ui.training.pool import training_pool

    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page("pages/train.py").run()
    app.checkbox(key="train-start-paused").check()
    app.number_input(key="train-pace").set_value(4.0)
    app.number_input(key="train-seed").set_value(47)
    app.run()
    assert "it starts paused" in " ".join(c.value for c in app.caption)
    next(b for b in app.button if b.label == "Train").click().run()
    ticket = app.session_state["training_ticket"]
    pool = training_pool()
    try:
        wait_for(lambda: pool.status(ticket).state == "running")
        time.sleep(0.5)
        assert pool.status(ticket).progress is None and pool.status(ticket).steps_per_second == 4
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        assert "Paused before its first step" in " ".join(str(p.proto.text) for p in app.get("progress"))
        assert app.button(key="resume-training") and not app.button(key="step-training").disabled
        app.button(key="step-training").click().run()
        wait_for(lambda: (p := pool.status(ticket).progress) is not None and p.step == 1)
        time.sleep(0.3)
        assert pool.status(ticket).progress.step == 1 and pool.status(ticket).paused
        app.run()
        app.button(key="resume-training").click().run()
        wait_for(lambda: pool.status(ticket).progress.step >= 3)
        app.run()
        assert "paced at 4 steps/s" in " ".join(str(p.proto.text) for p in app.get("progress"))
        app.number_input(key=f"pace-training-{ticket}").set_value(2.0).run()  # a new pace while it trains
        assert pool.status(ticket).steps_per_second == 2 and not app.exception
        app.number_input(key=f"pace-training-{ticket}").set_value(0.1).run()  # the widget allows it; the core does not
        assert pool.status(ticket).steps_per_second == 2
        assert "Pace not changed: steps per second must be 0" in " ".join(w.value for w in app.warning)
        assert app.number_input(key=f"pace-training-{ticket}").value == 2  # back to the pace it keeps
    finally:
        pool.stop(ticket)


LESSON = """title = "Again"
summary = "The RoPE preset, asked for again."
[[steps]]
title = "Train it"
text = "Train the default run."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
seed = 0
start_paused = true
"""


def test_only_the_live_runs_controls_show_beside_it(tmp_path, monkeypatch):
    """Issue 26: while a new run trains or is paused, the button opening an earlier run is gone; once the new
    run is stored, the button opens that one."""
    from ui.training.pool import training_pool

    (tmp_path / "again.toml").write_text(LESSON, encoding="utf-8")
    monkeypatch.setattr("ui.lessons.files.LESSON_ROOT", tmp_path)
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({"lesson": "again", "step": "1"})
    app.run()
    assert app.checkbox(key="train-start-paused").value  # the lesson's pace is the form's
    assert "lesson-open-run" in [b.key for b in app.button]  # seed 0 is the stored RoPE preset
    app.number_input(key="train-seed").set_value(73)
    app.number_input(key="train-steps").set_value(30)
    app.run()
    assert "lesson-open-run" not in [b.key for b in app.button]  # the form's run (seed 73) is not trained
    next(b for b in app.button if b.label == "Train").click().run()
    ticket = app.session_state["training_ticket"]
    pool = training_pool()
    try:
        wait_for(lambda: pool.status(ticket).paused)
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        assert "lesson-open-run" not in [b.key for b in app.button]  # paused: only its own controls
        app.button(key="resume-training").click().run()
        wait_for(lambda: pool.status(ticket).state == "done")
        app.run()  # the live view sees it done, selects it and redraws
        assert "training_ticket" not in app.session_state
        run_id = app.session_state["run_id"]
        assert run_id.endswith("-s73-" + run_id.split("-")[-1])  # the new run, selected
        button = app.button(key="lesson-open-run")
        assert run_id in button.help and button.label == "Open the trained run on the Dilution page"
    finally:
        with contextlib.suppress(KeyError):  # released once it ended
            pool.stop(ticket)

"""Links, the run download and the shared training pool, through AppTest."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.jobs import TrainingPool
from lengen.presets import DEFAULT_PRESET, PRESETS, preset_ids
from lengen.share import config_to_query
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training
from tests.helpers.waiting import wait_for
from ui.training.pool import SessionWatcher

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_link(params: dict[str, str | list[str]], page: str | None = None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    if page is not None:  # a link to a page: its first run draws that page
        app.run()
        app.switch_page(page)
    app.query_params.update(params)
    return app.run()


def texts(elements) -> str:
    return " ".join(e.value for e in elements)


def assert_no_exception(app: AppTest) -> None:
    assert not app.exception, [e.value for e in app.exception]


def test_a_link_with_a_preset_config_selects_that_run_and_the_url_follows_the_selection() -> None:
    learned = PRESETS["Learned (APE)"]
    app = open_link(config_to_query(learned))
    assert_no_exception(app)
    assert app.session_state["run_id"] == learned.run_id()
    assert not app.warning
    app.button(key="preset-RoPE").click().run()
    assert app.query_params["encoding"] == "rope"
    assert app.query_params == config_to_query(PRESETS["RoPE"])


def test_a_short_link_with_a_run_id_selects_it() -> None:
    run_id = preset_ids()["RoPE + linear attention"]
    app = open_link({"run": run_id})
    assert app.session_state["run_id"] == run_id
    assert "run" not in app.query_params and app.query_params["attention"] == "linear"


@pytest.mark.parametrize("params, words", [
    ({"steps": "abc"}, "'steps' must be a whole number"),
    ({"lr": "nan"}, "'lr' must be a finite number"),
    ({"encoding": "../../etc"}, "unknown encoding"),
    ({"seed": ["1", "2"]}, "'seed' is given 2 times"),
    ({"vocab": "9" * 500}, "'vocab' is too long"),
])
def test_a_bad_parameter_is_a_message_and_the_page_still_renders(params, words) -> None:
    app = open_link(params, page="pages/dilution.py")
    assert_no_exception(app)
    assert words in texts(app.warning).replace("\\", "")
    assert app.session_state["run_id"] == preset_ids()[DEFAULT_PRESET]  # nothing lost
    assert app.get("plotly_chart")
    assert app.query_params["encoding"] == "rope"  # the address bar shows what is on screen


@pytest.mark.parametrize("run_id", ["../x", "/etc/passwd", "a/b", "%2e%2e", "..%2f..%2fetc"])
def test_a_hostile_run_id_is_a_message(run_id) -> None:
    app = open_link({"run": run_id})
    assert_no_exception(app)
    assert "invalid run id" in texts(app.warning)
    assert app.session_state["run_id"] == preset_ids()[DEFAULT_PRESET]


def test_a_link_to_an_absent_run_id_is_a_message() -> None:
    app = open_link({"run": "rope-softmax-retrieval-s0-000000000000"})
    assert "not stored here" in texts(app.warning)


def test_a_link_to_an_untrained_config_opens_the_train_form_with_it() -> None:
    wanted = with_changes(RunConfig(), encoding="alibi", offset=5, steps=40, seed=9, n_layers=1, n_heads=2)
    app = open_link(config_to_query(wanted), page="pages/dilution.py")
    assert_no_exception(app)
    assert "not trained here yet" in texts(app.warning)
    assert app.title[0].value == "Train a run"
    inputs = {n.label: n.value for n in app.number_input}
    assert (inputs["Offset k"], inputs["Steps"], inputs["Seed"], inputs["Layers"], inputs["Heads"]) == (5, 40, 9, 1, 2)
    assert app.selectbox(key="train-encoding").value == "alibi"
    assert app.query_params == config_to_query(wanted)  # still the link's config while it waits


def test_view_settings_come_from_the_link_and_go_back_into_it() -> None:
    app = open_link({"longest": "1024", "samples": "64"}, page="pages/dilution.py")
    assert_no_exception(app)
    sliders = {s.label: s.value for s in app.select_slider}
    assert sliders["Longest test length"] == 1024 and sliders["Samples per length"] == 64
    app.select_slider(key="dilution-samples").set_value(128).run()
    assert app.query_params["samples"] == "128" and app.query_params["longest"] == "1024"


def test_a_bad_view_setting_is_a_message_beside_its_control() -> None:
    app = open_link({"samples": "100", "lengths": "16,64,999999"}, page="pages/dilution.py")
    assert_no_exception(app)
    assert "'samples' is 100" in texts(app.warning).replace("\\", "")
    assert {s.label: s.value for s in app.select_slider}["Samples per length"] == 256


def test_attention_lengths_from_the_link() -> None:
    app = open_link({"lengths": "16,128", "trace": "64"}, page="pages/attention.py")
    assert_no_exception(app)
    assert app.multiselect[0].value == [16, 128] and app.selectbox(key="attention-trace").value == 64
    bad = open_link({"lengths": "16,17"}, page="pages/attention.py")
    assert "'lengths' has [17]" in texts(bad.warning).replace("\\", "")
    assert_no_exception(bad)


def test_the_selected_run_can_be_downloaded() -> None:
    app = open_link({})
    labels = [e.proto.label for e in app.sidebar.get("download_button")]
    assert "Download this run (zip)" in labels


class BlockedTraining(Training):
    """Trains only once `gate` is set, so a test can hold the pool's only slot."""

    gate = threading.Event()

    def __iter__(self):
        self.gate.wait(30)
        yield from super().__iter__()


@pytest.fixture
def busy_pool(monkeypatch, tmp_path, request) -> Iterator[TrainingPool]:
    BlockedTraining.gate.clear()
    max_queue = getattr(request, "param", 200)
    pool = TrainingPool(RunStore(tmp_path), max_concurrent=1, device="cpu", max_queue=max_queue, trainer=BlockedTraining)
    monkeypatch.setattr("ui.training.pool.training_pool", lambda: pool)
    yield pool
    BlockedTraining.gate.set()
    pool.close()


def test_the_train_page_shows_the_queue_position_and_can_leave_the_queue(busy_pool) -> None:
    first = busy_pool.submit(with_changes(RunConfig(), steps=3, seed=101))
    second = busy_pool.submit(with_changes(RunConfig(), steps=3, seed=102))
    app = open_link({}, page="pages/train.py")
    app.number_input(key="train-steps").set_value(3)
    app.number_input(key="train-seed").set_value(103)
    app.button[0].click().run()
    assert_no_exception(app)
    assert "2nd in line" in texts(app.info) and "1 training running" in texts(app.info)
    app.button(key="stop-training").click().run()  # leaves the queue; the others are untouched
    assert_no_exception(app)
    assert "was cancelled" in texts(app.info)
    assert "training_ticket" not in app.session_state
    assert [busy_pool.status(t).state for t in (first, second)] == ["running", "queued"]


@pytest.mark.parametrize("busy_pool", [1], indirect=True)
def test_a_full_queue_says_so_and_keeps_the_form(busy_pool) -> None:
    running = busy_pool.submit(with_changes(RunConfig(), steps=3, seed=106))
    wait_for(lambda: busy_pool.status(running).state == "running", timeout=30)
    busy_pool.submit(with_changes(RunConfig(), steps=3, seed=107))  # waiting: the queue (of 1) is full
    app = open_link({}, page="pages/train.py")
    app.number_input(key="train-steps").set_value(3)
    app.number_input(key="train-seed").set_value(108)
    app.button[0].click().run()
    assert_no_exception(app)
    assert "The server is busy: 1 training is already waiting (the limit is 1); try again" in texts(app.error)
    assert "training_ticket" not in app.session_state
    assert app.number_input(key="train-seed").value == 108  # what was typed is still there
    assert busy_pool.counts() == {"running": 1, "queued": 1, "limit": 1}


def test_identical_requests_join_one_job(busy_pool) -> None:
    config = with_changes(RunConfig(), steps=3, seed=104)
    other = busy_pool.submit(config)
    app = open_link(config_to_query(config), page="pages/train.py")
    app.button[0].click().run()
    ticket = app.session_state["training_ticket"]
    assert busy_pool.counts() == {"running": 1, "queued": 0, "limit": 1}  # one job, two tickets
    BlockedTraining.gate.set()
    wait_for(lambda: busy_pool.status(ticket).state != "running", timeout=60)
    app.run()
    assert_no_exception(app)
    assert app.session_state["run_id"] == config.run_id()
    assert "Finished: saved and selected" in texts(app.success)
    assert busy_pool.status(other).state == "done"


def test_a_session_gone_past_the_grace_releases_its_ticket(busy_pool) -> None:
    ticket = busy_pool.submit(with_changes(RunConfig(), steps=3, seed=105))
    watcher = SessionWatcher(period=3600, grace=10)
    watcher.watch(busy_pool, ticket, "session-a")
    assert watcher.sweep(lambda session: True, now=0) == []
    assert watcher.sweep(lambda session: False, now=100) == []  # gone: the grace starts
    assert watcher.sweep(lambda session: True, now=105) == []  # back (a reconnect): the grace resets
    assert watcher.sweep(lambda session: False, now=106) == []
    assert watcher.sweep(lambda session: False, now=117) == [ticket]
    with pytest.raises(KeyError):
        busy_pool.status(ticket)


def test_the_train_form_keeps_a_links_config_once_its_run_is_trained_and_selected() -> None:
    """The run's selection ends the link's wait (`select_run`): the form went back to the defaults (seed 0,
    1,500 steps) under the finished run, so a second press trained another config than the one shown trained."""
    from tests.app.test_train_controls import wait_for
    from ui.training.pool import training_pool

    wanted = with_changes(RunConfig(), offset=4, vocab_size=12, train_length=20, steps=25, seed=9_317, d_model=32)
    app = open_link(config_to_query(wanted), page="pages/dilution.py")
    assert_no_exception(app)
    app.switch_page("pages/train.py").run()  # where the link sent the browser (the harness stays on its page)
    before = {n.label: n.value for n in app.number_input}
    assert (before["Offset k"], before["Steps"], before["Seed"]) == (4, 25, 9_317)
    next(b for b in app.button if b.label == "Train").click().run()
    ticket = app.session_state["training_ticket"]
    wait_for(lambda: training_pool().status(ticket).state == "done")
    app.run()  # the live view sees it done, selects it and redraws
    assert_no_exception(app)
    assert app.session_state["run_id"] == wanted.run_id()
    after = {n.label: n.value for n in app.number_input}
    assert after == before

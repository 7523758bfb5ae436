"""With LENGEN_RAY_ADDRESS naming a cluster that takes no connection, the Train page says so and offers no
Train button: no silent fall back to local trainings (lengen.ray_pool). Ray is not needed:
the address is refused before Ray is imported."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # free once closed: a connection there is refused


def test_an_unreachable_cluster_is_said_on_the_train_page(monkeypatch):
    from ui.training.pool import training_pool

    address = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("LENGEN_RAY_ADDRESS", address)
    training_pool.clear()  # a pool another test made here is local; this one must be the cluster's
    try:
        app = AppTest.from_file(APP, default_timeout=120)
        app.run()
        started = time.monotonic()
        app.switch_page("pages/train.py").run()
        took = time.monotonic() - started
        errors = " ".join(error.value for error in app.error)
        assert f"Ray at {address}" in errors and "cannot be reached" in errors, errors
        assert "unsets LENGEN_RAY_ADDRESS" in errors  # single-machine mode is the operator's choice
        assert not any(button.label == "Train" for button in app.button)  # nothing trains anywhere else
        assert took < 30, f"the page waited {took:.0f} s for the absent cluster"
    finally:
        training_pool.clear()


def _control_clicked(kind: str) -> None:
    """A control's click whose pool fails as `kind` says ('cluster' or 'released'), then the message shown."""
    import streamlit as st

    from lengen.ray_pool import ClusterUnreachable
    from ui.training.form import show_message
    from ui.training.live import _command

    def pause(ticket: int) -> None:
        if kind == "cluster":
            raise ClusterUnreachable(f"the training cluster stopped answering ticket {ticket}")
        raise KeyError(ticket)

    if st.button("Pause", on_click=_command, args=(pause, 7)):
        pass
    show_message()


def test_a_control_clicked_when_the_cluster_stopped_answering_is_a_message_not_a_traceback():
    for kind, expected in (("cluster", "did not take the command: the training cluster stopped answering ticket 7"),
                           ("released", "no longer held by the server")):
        app = AppTest.from_function(_control_clicked, args=(kind,), default_timeout=60)
        app.run()
        app.button[0].click().run()
        assert not app.exception, [e.value for e in app.exception]
        shown = " ".join(m.value for m in (*app.error, *app.warning))
        assert expected in shown, shown

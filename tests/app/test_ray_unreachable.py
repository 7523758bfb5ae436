"""With LENGEN_RAY_ADDRESS naming a cluster that takes no connection, the Train page says so and offers no
Train button: no silent fall back to local trainings (lengen_core.serving.ray_pool). Ray is not needed:
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

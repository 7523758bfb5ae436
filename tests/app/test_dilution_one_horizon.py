"""Dilution says the run's measured horizon once, from one computation (issue 41): the chart's caption names the
Measurement's `measured_horizon`, the one the "Horizon, measured" metric shows (ui.views.dilution, ui.reach)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.views.dilution
from lengen.presets import dilution_lengths, preset_ids
from lengen.store import preset_store
from ui.runs import measurement

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.mark.parametrize("preset, longest, horizon, said", [
    ("RoPE", 65_536, "8,192", "stays ≥ 0.9 up to L = 8,192"),  # shipped numbers: 0.945 at 8,192, 0.566 at 16,384
    ("Learned (APE)", 4_096, "16", "falls below 0.9 already at L = 32"),
])
def test_the_chart_caption_and_the_metric_say_the_measurements_horizon(preset: str, longest: int, horizon: str,
                                                                      said: str) -> None:
    given = []
    original = ui.views.dilution.dilution_look_for

    def recording(*args, **kwargs):
        given.append(kwargs.get("measured"))
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ui.views.dilution, "dilution_look_for", recording)
        app = AppTest.from_file(APP, default_timeout=300)
        app.session_state["run_id"] = preset_ids()[preset]
        app.run()
        app.switch_page("pages/dilution.py")
        app.query_params.update({"longest": str(longest), "samples": "256"})
        app.run()
    assert not app.exception, [e.value for e in app.exception]
    config = preset_store().load(preset_ids()[preset]).config
    measured = measurement(preset_ids()[preset], dilution_lengths(config, longest), 256).measured_horizon
    assert given == [measured] and f"{measured.length:,}" == horizon  # the page's one measurement, handed on
    assert {m.label: m.value for m in app.metric}["Horizon, measured"] == horizon
    look_for = next(c.value for c in app.caption if c.value.startswith("**What to look for:** This run"))
    assert said in look_for

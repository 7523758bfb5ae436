"""Every view is a link: Compare's runs and settings, the Transformer page's head and samples."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lengen.presets import preset_ids, single_head_presets, transformer_presets

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ROPE, LINEAR = preset_ids()["RoPE"], preset_ids()["RoPE + linear attention"]


def open_link(params: dict[str, str | list[str]], page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    app.switch_page(page)
    app.query_params.clear()  # a pasted link: only its own parameters
    app.query_params.update(params)
    return app.run()


def warnings(app: AppTest) -> str:
    return " ".join(w.value for w in app.warning).replace("\\", "")


def test_compare_opens_exactly_the_linked_runs_and_settings() -> None:
    app = open_link({"compare": [LINEAR, ROPE], "longest": "256", "samples": "64", "scaled": "false"},
                    "pages/compare.py")
    assert not app.exception, [e.value for e in app.exception]
    assert not app.warning
    assert app.multiselect(key="compare-runs").value == [LINEAR, ROPE]
    assert app.select_slider(key="compare-longest").value == 256
    assert app.select_slider(key="compare-samples").value == 64
    assert app.toggle(key="compare-scaled").value is False
    assert app.query_params["compare"] == [LINEAR, ROPE]  # the address bar still says what is shown
    assert (app.query_params["longest"], app.query_params["scaled"]) == ("256", "false")
    app.toggle(key="compare-scaled").set_value(True).run()
    assert app.query_params["scaled"] == "true" and app.query_params["compare"] == [LINEAR, ROPE]


def test_compare_drops_each_bad_run_id_with_a_message_and_keeps_the_rest() -> None:
    absent = "rope-softmax-retrieval-s9-000000000000"
    app = open_link({"compare": [ROPE, "../etc/passwd", absent], "samples": "64", "longest": "128"},
                    "pages/compare.py")
    assert not app.exception, [e.value for e in app.exception]
    text = warnings(app)
    assert "invalid run id '../etc/passwd'" in text and f"names the run '{absent}', which is not stored here" in text
    assert app.multiselect(key="compare-runs").value == [ROPE]
    assert app.select_slider(key="compare-samples").value == 64  # nothing else lost
    assert app.query_params["compare"] == ROPE


def test_compare_with_only_bad_ids_keeps_its_runs() -> None:
    app = open_link({"compare": "nope", "longest": "128", "samples": "64"}, "pages/compare.py")
    assert "not stored here" in warnings(app)
    assert app.multiselect(key="compare-runs").value == list(single_head_presets().values())


@pytest.mark.slow  # 22 s; the bad-head and best-head tests below open the same page from links
def test_transformer_head_and_samples_come_from_the_link_and_go_back() -> None:
    run_id = transformer_presets()["Transformer RoPE"]
    app = open_link({"run": run_id, "head": "L1H0", "samples": "16"}, "pages/transformer.py")
    assert not app.exception, [e.value for e in app.exception]
    assert app.selectbox(key="transformer-head").value == "L1H0"
    assert app.select_slider(key="transformer-samples").value == 16
    assert app.query_params["head"] == "L1H0" and app.query_params["samples"] == "16"
    app.selectbox(key="transformer-head").set_value("L0H1").run()
    assert app.query_params["head"] == "L0H1"


def test_transformer_bad_head_is_a_message_and_the_best_head_stays() -> None:
    run_id = transformer_presets()["Transformer RoPE"]
    app = open_link({"run": run_id, "head": "L7H0", "samples": "16"}, "pages/transformer.py")
    assert not app.exception, [e.value for e in app.exception]
    assert "'head' is 'L7H0': allowed L0H0, L0H1, L1H0, L1H1" in warnings(app)
    assert app.selectbox(key="transformer-head").value in {"L0H0", "L0H1", "L1H0", "L1H1"}
    assert app.select_slider(key="transformer-samples").value == 16


def test_transformer_head_starts_from_the_best_head_of_each_run_opened() -> None:
    app = open_link({"run": transformer_presets()["Transformer RoPE"], "head": "L0H0"}, "pages/transformer.py")
    assert app.selectbox(key="transformer-head").value == "L0H0"
    app.button(key="open-Transformer learned").click().run()
    assert app.session_state["run_id"] == transformer_presets()["Transformer learned"]
    heads = next(d.value for d in app.dataframe if "argmax_offset" in d.value.columns)
    best = heads.sort_values(["is_carrier", "target_weight"], ascending=False).iloc[0]
    assert f"L{best['layer']}H{best['head']}" != "L0H0"  # else this test could not tell
    assert app.selectbox(key="transformer-head").value == f"L{best['layer']}H{best['head']}"
    assert app.query_params["head"] == f"L{best['layer']}H{best['head']}"

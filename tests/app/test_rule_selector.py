"""Inference rules (issue 17) on Dilution, Compare, Carrier and Attention: a chosen rule gets its own
rows in the charts and tables, a link with rules opens with them and keeps them in the address bar,
and a bad link value is a message of its own that loses nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from lengen.presets import PRESETS, preset_ids
from lengen_core.analysis.rules import RULES
from ui.captions.common import share
from ui.rules.captions import UP_TO

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ROPE, LINEAR, LEARNED = (preset_ids()[name] for name in ("RoPE", "RoPE + linear attention", "Learned (APE)"))
TASK = PRESETS["RoPE"].task  # the RoPE preset's task: k and L_train
UNFORMATTED = re.compile(r"%\{(?!fullData\.)[^}:]+\}")
SMALL = {"longest": "128", "samples": "64"}  # Dilution and Compare at lengths up to 8×, to keep these fast


def open_link(params: dict[str, str | list[str]], page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=600)
    app.run()
    app.switch_page(page)
    app.query_params.clear()  # a pasted link: only its own parameters
    app.query_params.update(params)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def plain(text: str) -> str:
    return text.replace("\\", "")


def warnings(app: AppTest) -> str:
    return plain(" ".join(w.value for w in app.warning))


def figure(app: AppTest, title: str) -> dict:
    """The plotly figure (as JSON) whose title starts with `title` ({} when there is none)."""
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"].get("title", {}).get("text", "").startswith(title):
            return spec
    return {}


def traces(app: AppTest, title: str) -> list[str]:
    """The trace names of the chart whose title starts with `title` ([] when there is none)."""
    return [trace.get("name") for trace in figure(app, title).get("data", [])]


def assert_readable(spec: dict) -> None:
    """As tests/app/test_chart_data.py asks of every chart: log axes labelled at powers of ten, every
    hover with its numbers formatted."""
    assert spec, "no such chart"
    for name, axis in spec["layout"].items():
        if re.fullmatch(r"[xy]axis\d*", name) and axis.get("type") == "log":
            assert axis.get("dtick") == 1 and axis.get("exponentformat") == "power", name
    for trace in spec["data"]:
        if trace.get("hoverinfo") != "skip":
            assert trace.get("hovertemplate") and not UNFORMATTED.findall(trace["hovertemplate"]), trace.get("name")


def rules_table(app: AppTest):
    return next(d.value for d in app.dataframe if f"{UP_TO}, predicted" in d.value.columns)


def test_a_dilution_link_with_rules_draws_each_rule_beside_the_unmodified_run() -> None:
    app = open_link({**SMALL, "rules": "log-n,ntk:4"}, "pages/dilution.py")
    assert not app.warning
    assert app.multiselect(key="dilution-rules").value == ["log-n", "ntk"]
    assert app.text_input(key="dilution-rules-ntk").value == "4"
    for title in ("Accuracy under each rule", "Target mass p under each rule"):
        assert {f"{rule} {kind}" for rule in ("none", "log-n", "ntk:4") for kind in ("measured", "predicted")} \
            <= set(traces(app, title))
        assert_readable(figure(app, title))
    table = rules_table(app)
    assert table["rule"].tolist() == ["none", "log-n", "ntk:4"]
    assert table["changes"].tolist() == ["nothing", "logits", "carrier"]
    assert app.query_params["rules"] == "log-n,ntk:4"
    p = dict(zip(table["rule"], table["p there"], strict=True))
    assert p["log-n"] > p["none"]  # log-n keeps the target's mass where the unmodified run dilutes it
    captions = plain(" ".join(c.value for c in app.caption))
    assert f"log-n** keeps p at {share(p['log-n'])} at 128 (8×) where the unmodified run falls to {share(p['none'])}" \
        in captions


def test_choosing_a_rule_adds_its_rows_and_a_bad_parameter_is_a_message_that_keeps_the_choice() -> None:
    app = open_link(SMALL, "pages/dilution.py")
    assert not traces(app, "Accuracy under each rule")  # nothing chosen: nothing extra drawn
    app.multiselect(key="dilution-rules").set_value(["yarn", "pi"]).run()
    assert {"yarn measured", "pi measured", "none measured"} <= set(traces(app, "Accuracy under each rule"))
    assert app.query_params["rules"] == "yarn,pi"
    app.text_input(key="dilution-rules-yarn").set_value("two").run()
    assert "yarn's scale s 'two' is not a number" in warnings(app)
    assert app.multiselect(key="dilution-rules").value == ["yarn", "pi"]  # nothing chosen is lost
    assert app.select_slider(key="dilution-longest").value == 128
    names = traces(app, "Accuracy under each rule")
    assert "pi measured" in names and "yarn measured" not in names  # left out until fixed
    assert app.query_params["rules"] == "pi"
    app.text_input(key="dilution-rules-yarn").set_value("8").run()
    assert "yarn:8 measured" in traces(app, "Accuracy under each rule")
    assert app.query_params["rules"] == "yarn:8,pi"


def test_a_bad_rules_link_is_a_message_per_value_and_keeps_the_rest() -> None:
    app = open_link({**SMALL, "rules": "log-n,bogus,ntk:0.5,pi:abc"}, "pages/dilution.py")
    text = warnings(app)
    assert f"unknown inference rule 'bogus': allowed {', '.join(RULES)}; dropped" in text
    assert "ntk's scale α 0.5 is out of range: allowed 1 to" in text
    assert "pi's scale s 'abc' is not a number" in text
    assert app.multiselect(key="dilution-rules").value == ["log-n"]
    assert app.select_slider(key="dilution-longest").value == 128  # nothing else lost
    assert app.select_slider(key="dilution-samples").value == 64
    assert app.query_params["rules"] == "log-n"


def test_a_rule_undefined_for_the_run_is_explained_not_hidden() -> None:
    app = open_link({**SMALL, "run": LINEAR, "rules": "log-n,pi"}, "pages/dilution.py")
    assert "'log-n': log-n scales the logits before the softmax, and linear attention has none" in warnings(app)
    selector = app.multiselect(key="dilution-rules")
    assert selector.value == ["pi"]
    assert {option.split(":")[0] for option in selector.options} == {"pi", "ntk", "dynamic", "ntk-by-parts",
                                                                     "longrope"}  # shown as "pi: positions × …"
    captions = plain(" ".join(c.value for c in app.caption))
    for rule in ("log-n", "ssmax", "yarn"):
        assert f"**{rule}**: {rule} scales the logits before the softmax" in captions


def test_compare_skips_a_rule_for_the_run_it_is_undefined_for_and_keeps_it_for_the_others() -> None:
    app = open_link({"compare": [ROPE, LINEAR], **SMALL, "rules": "log-n"}, "pages/compare.py")
    assert not app.warning
    assert app.multiselect(key="compare-rules").value == ["log-n"]
    table = rules_table(app)
    assert table[["run", "rule"]].values.tolist() == [["RoPE", "none"], ["RoPE", "log-n"],
                                                      ["RoPE + linear attention", "none"]]
    assert "RoPE + linear attention**: log-n skipped: log-n scales the logits" in plain(
        " ".join(c.value for c in app.caption))
    panels = figure(app, "Accuracy under each rule, per run")
    assert_readable(panels)
    assert {"none measured", "log-n measured"} <= {trace.get("name") for trace in panels["data"]}
    notes = [note.get("text") for note in panels["layout"]["annotations"]]
    assert "RoPE" in notes and "RoPE + linear attention" in notes  # a panel per run, titled
    assert "new text" not in notes  # plotly's placeholder for an annotation without text
    assert app.query_params["rules"] == "log-n" and app.query_params["compare"] == [ROPE, LINEAR]


def test_carrier_link_draws_pi_and_ntk_over_the_unmodified_carrier() -> None:
    app = open_link({"rules": "pi,ntk", "at": str(8 * TASK.train_length), "search": "4096"}, "pages/carrier.py")
    assert not app.warning
    names = traces(app, "Carrier s(Δ) read at")
    assert_readable(figure(app, "Carrier s(Δ) read at"))
    assert {"s(Δ) none", "s(Δ) pi", "s(Δ) ntk"} <= set(names)
    assert f"peak pi: Δ = {TASK.offset * 8}" in names  # PI with s = 8 moves the peak from k to k·s
    assert f"peak none: Δ = {TASK.offset}" in names
    recurrences = next(d.value for d in app.dataframe if "near-recurrences" in d.value.columns)
    assert recurrences["rule"].tolist() == ["none", "pi", "ntk"]
    app.select_slider(key="carrier-at").set_value(4 * TASK.train_length).run()
    assert f"peak pi: Δ = {TASK.offset * 4}" in traces(app, "Carrier s(Δ) read at")
    assert app.query_params["at"] == str(4 * TASK.train_length) and app.query_params["rules"] == "pi,ntk"


def test_carrier_of_a_learned_table_says_why_no_rule_applies() -> None:
    app = open_link({"run": LEARNED, "rules": "pi"}, "pages/carrier.py")
    assert "'pi': pi is not defined for learned" in warnings(app)
    assert "carrier-rules" not in [m.key for m in app.multiselect]  # no control that would do nothing
    assert "ntk rescales RoPE's base and is not defined for learned" in plain(" ".join(c.value for c in app.caption))


def test_attention_map_under_a_rule_sits_beside_the_unmodified_one() -> None:
    length = 8 * TASK.train_length
    app = open_link({"rules": "log-n,yarn", "rule-length": str(length)}, "pages/attention.py")
    assert "this page shows 1 rule at a time; dropped" in warnings(app)
    assert app.multiselect(key="attention-rules").value == ["log-n"]
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in app.get("plotly_chart")]
    assert f"none · L = {length}" in titles and f"log-n · L = {length}" in titles
    caption = next(plain(c.value) for c in app.caption if "**log-n** at L =" in plain(c.value))
    ruled, unmodified = (float(w) for w in re.findall(r"weight (\d\.\d+) on the target", caption))
    assert ruled >= unmodified  # log-n keeps the last query's weight on its target at 8×
    assert f"attends most to key {length - 1 - TASK.offset} = t − k" in caption
    assert app.query_params["rules"] == "log-n" and app.query_params["rule-length"] == str(length)


def test_a_carrier_link_with_the_frequency_rules_draws_each_and_a_table_that_does_not_fit_is_a_message() -> None:
    length = 8 * TASK.train_length
    link = "dynamic:3,ntk-by-parts,longrope:8x8/1x56"
    app = open_link({"rules": link, "at": str(length), "search": "4096"}, "pages/carrier.py")
    assert not app.warning
    assert app.multiselect(key="carrier-rules").value == ["dynamic", "ntk-by-parts", "longrope"]
    assert app.text_input(key="carrier-rules-longrope").value == "8x8/1x56"  # the table, as the link wrote it
    assert {"s(Δ) none", "s(Δ) dynamic:3", "s(Δ) ntk-by-parts", "s(Δ) longrope:8x8/1x56"} \
        <= set(traces(app, "Carrier s(Δ) read at"))
    captions = plain(" ".join(c.value for c in app.caption))
    assert f"**longrope:8x8/1x56** (λ = 1 to 8 at L = {length:,})" in captions
    assert f"**dynamic:3** (f = 3, α = {3 * 8 - 2} at L = {length:,})" in captions
    assert app.query_params["rules"] == link
    app.text_input(key="carrier-rules-longrope").set_value("1x8").run()
    assert "longrope's table has 8 factors; this run's heads are 128 wide, so it needs 64" in warnings(app)
    assert app.multiselect(key="carrier-rules").value == ["dynamic", "ntk-by-parts", "longrope"]  # kept, left out
    assert app.query_params["rules"] == "dynamic:3,ntk-by-parts"

"""The figures and CSVs the pages hand to `ui.widgets.chart`, recorded as the pages run: every CSV of
accuracy or target mass has its sample count, every CSV is named after its run, accuracy is drawn
with its Wilson band, log axes are labelled at powers of ten, hovers are formatted, heatmap axes end
at the data, and the Carrier page shows no control that does nothing for the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.widgets
from lengen.presets import preset_ids
from tests.helpers.address import address

APP = str(Path(__file__).resolve().parents[2] / "app.py")
UNFORMATTED = re.compile(r"%\{(?!fullData\.)[^}:]+\}")
MEASURES = {"accuracy", "target_mass", "accuracy_beyond"}  # a CSV with any of these needs `samples`


def record(page: str, preset: str, params: dict[str, str] | None = None) -> tuple[AppTest, list[dict]]:
    """Run `page` with `preset` selected (and the link's `params`); the app and every chart() call the
    page made: figure, data, name, stem."""
    calls = []
    original = ui.widgets.chart

    def recording(figure, look_for, data, name, stem=None):
        calls.append({"figure": figure, "look_for": look_for, "data": data, "name": name, "stem": stem})
        original(figure, look_for, data, name, stem)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ui.widgets, "chart", recording)  # the pages import it when they run
        app = AppTest.from_file(APP, default_timeout=300)
        app.session_state["run_id"] = preset_ids()[preset]
        app.run()
        calls.clear()  # the first run draws the Start page
        app.switch_page(page)
        app.query_params.update(params or {})
        app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app, calls


@pytest.fixture(scope="module")
def apps() -> dict[str, tuple[AppTest, list[dict]]]:
    """Each page as the RoPE preset draws it; Attention again with a two-layer run, Carrier with a
    learned table. Dilution at 2^12, 128 samples (view settings from the link) to keep the suite fast."""
    return {
        "start": record("pages/start.py", "RoPE"),
        "dilution": record("pages/dilution.py", "RoPE", {"longest": "4096", "samples": "128"}),
        "attention": record("pages/attention.py", "RoPE"),
        "carrier": record("pages/carrier.py", "RoPE"),
        "carrier-learned": record("pages/carrier.py", "Learned (APE)"),
        "attention-transformer": record("pages/attention.py", "Transformer RoPE"),
    }


@pytest.fixture(scope="module")
def drawn(apps) -> dict[str, list[dict]]:
    return {page: calls for page, (_, calls) in apps.items()}


def test_every_accuracy_and_mass_csv_has_its_sample_count(drawn) -> None:
    measured = [(page, c["name"]) for page, calls in drawn.items() for c in calls if MEASURES & set(c["data"].columns)]
    assert {("start", "start-accuracy"), ("dilution", "dilution"), ("dilution", "inverse-mass")} <= set(measured)
    for page, calls in drawn.items():
        for c in calls:
            if MEASURES & set(c["data"].columns):
                assert "samples" in c["data"].columns, (page, c["name"])
                assert (c["data"]["samples"] == 128).all(), (page, c["name"])  # Start's 128, the link's 128


def test_every_csv_is_named_after_its_run(drawn) -> None:
    for page in ("dilution", "attention", "carrier"):
        assert drawn[page]
        assert {c["stem"] for c in drawn[page]} == {preset_ids()["RoPE"]}, page
    assert {c["stem"] for c in drawn["carrier-learned"]} == {preset_ids()["Learned (APE)"]}
    assert {c["stem"] for c in drawn["attention-transformer"]} == {preset_ids()["Transformer RoPE"]}
    assert [c["stem"] for c in drawn["start"]] == ["presets"]


def filled(figure) -> int:
    return sum(trace.fill in ("tonexty", "toself") for trace in figure.data)


def test_accuracy_is_drawn_with_its_band(drawn) -> None:
    start = drawn["start"][0]["figure"]
    assert filled(start) == 3  # one band per preset
    dilution = next(c["figure"] for c in drawn["dilution"] if c["name"] == "dilution")
    assert filled(dilution) == 1


def test_dilution_draws_the_ideal_vote_readout_beside_the_model_and_its_caption_reads_it(drawn) -> None:
    """Issue 27: the vote readout on the same sequences, beside the model's accuracy, from the preset's shipped
    numbers, in the CSV too; the caption says which one limits."""
    call = next(c for c in drawn["dilution"] if c["name"] == "dilution")
    [vote] = [t for t in call["figure"].data if t.name == "ideal vote readout"]
    assert list(vote.y) == list(call["data"]["vote_accuracy"]) and call["data"]["vote_accuracy"].notna().all()
    assert "ideal vote readout" in call["look_for"]


def test_every_figure_is_readable(drawn) -> None:
    for page, calls in drawn.items():
        for c in calls:
            figure, where = c["figure"], (page, c["name"])
            for name in figure.layout:
                axis = figure.layout[name]
                if re.fullmatch(r"[xy]axis\d*", name) and axis.type == "log":
                    assert axis.dtick == 1 and axis.exponentformat == "power", where
            for trace in figure.data:
                if trace.hoverinfo != "skip":
                    assert trace.hovertemplate and not UNFORMATTED.findall(trace.hovertemplate), where


def test_heatmap_axes_end_at_the_last_position(drawn) -> None:
    maps = [c for c in drawn["attention"] if c["name"].startswith("heatmap-")]
    assert len(maps) == 4  # 16, 32, 64, 128 by default
    for c in maps:
        length = int(c["name"].removeprefix("heatmap-"))
        assert tuple(c["figure"].layout.xaxis.range) == (-0.5, length - 0.5)
        assert tuple(c["figure"].layout.yaxis.range) == (length - 0.5, -0.5)


def test_a_multi_layer_run_names_the_head_its_maps_show(drawn) -> None:
    titles = [c["figure"].layout.title.text for c in drawn["attention-transformer"]]
    assert titles and all(title.startswith("Layer 0, head 0 · ") for title in titles)
    assert not any("head" in c["figure"].layout.title.text for c in drawn["attention"])


def test_one_head_of_a_transformer_makes_no_single_head_claim(drawn) -> None:
    """Layer 0 head 0 of a shift-task transformer is not its carrier head and every query t ≥ k is scored:
    no 'RoPE run does NOT follow t − k', no 'the only one the retrieval task scores'."""
    single = " ".join(c["look_for"] for c in drawn["attention"])
    several = " ".join(c["look_for"] for c in drawn["attention-transformer"])
    assert "the retrieval task scores" in single and "relative rule (C3)" in single
    assert "retrieval task" not in several and "C3" not in several and "does NOT" not in several


def test_m_out_says_what_it_was_fitted_to(apps) -> None:
    app, _ = apps["dilution"]
    assert {"m_out (fitted)", "Largest error of the fit"} <= {m.label for m in app.metric}
    caption = next(c.value for c in app.caption if c.value.startswith("**m_out: "))
    assert re.match(r"\*\*m_out: \d\.\d\d \(\d\.\d\d–\d\.\d\d; answers alone \d\.\d\d–\d\.\d\d\), "
                    r"fitted 16–[\d,]+ \(\d+ lengths\), 128 samples", caption), caption


@pytest.mark.parametrize("page, slider", [("carrier", True), ("carrier-learned", False)])
def test_the_near_recurrence_search_is_offered_only_where_it_runs(apps, page: str, slider: bool) -> None:
    app, _ = apps[page]
    assert ("carrier-search" in [s.key for s in app.select_slider]) is slider
    assert ("search" in address(app)) is slider


def test_every_csv_offered_is_keyed_by_run_id(drawn) -> None:
    """Issue 40: a chart's CSV names its run in a column, not only in its file name, so downloads of several runs
    concatenated stay apart (ui.widgets.keyed); a table of several runs keys each row itself."""
    for page, calls in drawn.items():
        for c in calls:
            table = ui.widgets.keyed(c["data"], c["stem"])
            assert "run_id" in table.columns, (page, c["name"])
            assert set(table["run_id"]) <= set(preset_ids().values()), (page, c["name"], set(table["run_id"]))
            assert len(table) == len(c["data"]) and list(table.columns[-len(c["data"].columns):]) == list(c["data"].columns)
    start = drawn["start"][0]["data"]
    assert start.groupby("run")["run_id"].nunique().eq(1).all() and start["run_id"].nunique() == 3

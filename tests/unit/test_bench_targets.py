"""The benchmark's judgement (bench.__main__._targets over bench.common.TARGETS, printed by bench.report):
each figure beside its target and the peer, checked on the right value, from a made-up run's results.
Nothing is trained or timed here."""

from __future__ import annotations

import pytest

from bench.__main__ import REPORTED, RESULTS, _targets, main
from bench.common import TARGETS
from bench.report import render, targets_table

GB = 1e9


def training(lengen_rate: float, peer_rate: float, lengen_to: float | None, peer_to: float | None,
             peer_seconds: float = 3.0) -> dict:
    def side(rate: float, to: float | None, seconds: float) -> dict:
        return {"steps_per_second": rate, "seconds_to_target": to, "steps_to_target": None if to is None else 150,
                "reached_target": "3/3" if to is not None else "0/3",
                "runs": [{"seed": s, "steps": 300, "seconds": seconds} for s in range(3)]}

    return {"lengen": side(lengen_rate, lengen_to, 300 / lengen_rate), "peer": side(peer_rate, peer_to, peer_seconds)}


def results(**parts) -> dict:
    meta = {"date": "2026-12-03 19:00 UTC", "commit": "abc", "note": "", "duration_seconds": 1.0,
            "machine": {"cpu_count": 2, "torch_threads": 2}, "versions": {"python": "3.11", "torch": "2.13"},
            "settings": {"quick": False, "parts": ["training"], "runs": 3, "steps": 300, "samples": 256}}
    return {"meta": meta, **parts}


def rows_by_figure(rows: list[dict]) -> dict[str, dict]:
    return {row["figure"]: row for row in rows}


def test_training_is_judged_per_encoding_at_the_default_width_on_the_ratio_to_the_peer() -> None:
    rows = rows_by_figure(_targets(results(training={
        "rope": {"128": training(600, 100, 0.5, 2.0), "64": training(400, 100, 1.5, 2.0)},
        "learned": {"128": training(400, 100, None, 2.0)},
    })))
    fast = rows["training steps/s, RoPE, d_model 128"]
    assert (fast["lengen"], fast["peer"], fast["value"], fast["status"]) == (600, 100, 6.0, "met")
    assert rows["training steps/s, learned positions, d_model 128"]["status"] == "missed"  # 4× < 5×
    assert rows["training seconds to 99%, RoPE, d_model 128"]["value"] == 0.25
    assert rows["training seconds to 99%, RoPE, d_model 128"]["status"] == "met"
    never = rows["training seconds to 99%, learned positions, d_model 128"]
    assert never["status"] == "missed" and "lengen did not reach 99%" in never["note"]
    # another width is measured beside the default one: its ratio is reported, not judged (issue 28's targets
    # are at today's default config)
    narrow = rows["training steps/s, RoPE, d_model 64"]
    assert narrow["value"] == 4.0 and narrow["status"] == REPORTED
    assert rows["training seconds to 99%, RoPE, d_model 64"]["value"] == 0.75
    assert rows["training seconds to 99%, RoPE, d_model 64"]["status"] == REPORTED
    summary = "\n".join(targets_table(list(rows.values())))
    assert "2 met, 2 missed, 0 not measured, 2 reported beside them." in summary
    assert "reported" not in "\n".join(targets_table([fast]))


def test_a_peer_that_never_reaches_99_percent_bounds_the_ratio_from_above() -> None:
    rows = rows_by_figure(_targets(results(training={
        "rope": {"128": training(600, 100, 0.5, None, peer_seconds=3.0),
                 "64": training(600, 100, 2.0, None, peer_seconds=3.0)}})))
    bounded = rows["training seconds to 99%, RoPE, d_model 128"]
    assert bounded["value"] == pytest.approx(0.5 / 3.0) and bounded["status"] == "met"
    assert "upper bound" in bounded["note"]
    # 2 s against the peer's whole 3 s says nothing about a peer that would need longer
    assert rows["training seconds to 99%, RoPE, d_model 64"]["status"] == "not measured"


def issue(length: int, core_seconds: float, command_seconds: float, command_mass: float = 0.25) -> dict:
    core = {"seconds": core_seconds, "peak_rss_bytes": 0.6 * GB, "accuracy": 1.0, "target_mass": 0.25}
    command = {"seconds": command_seconds, "peak_rss_bytes": 1.2 * GB, "accuracy": 1.0, "target_mass": command_mass}
    return {"length": length, "samples": 256, "core": core, "command": command, "command_startup": {"seconds": 1.0}}


def test_the_evaluation_at_2_20_is_judged_only_when_that_is_what_ran() -> None:
    rows = _targets(results(evaluation_issue=issue(1 << 20, 1.5, 2.5, command_mass=0.2500001)))
    statuses = [(row["figure"].split(":")[-1].strip(), row["status"]) for row in rows]
    assert [status for _, status in statuses] == ["met", "met", "missed", "missed", "met"]
    assert rows[3]["value"] == pytest.approx(1.2)  # GB
    assert _targets(results(evaluation_issue=issue(1 << 20, 1.5, 1.5, command_mass=0.3)))[-1]["status"] == "missed"
    small = _targets(results(evaluation_issue=issue(1 << 12, 0.1, 0.1)))
    assert all(row["status"] == "not measured" and "not 2^20 × 256" in row["note"] for row in small)


def test_a_page_switch_is_judged_on_the_slowest_switch_measured() -> None:
    app = {"start_seconds": 4.0, "preset_dilution_seconds": 0.9, "switch_attention_cold_seconds": 0.5,
           "switch_carrier_cold_seconds": 1.4, "switch_dilution_warm_seconds": 0.3}
    rows = rows_by_figure(_targets(results(app=app)))
    switch = rows[TARGETS["app_page_switch_seconds"].figure]
    assert (switch["value"], switch["status"]) == (1.4, "missed")
    assert rows[TARGETS["app_start_seconds"].figure]["status"] == "met"
    assert rows[TARGETS["app_first_live_update_seconds"].figure]["status"] == "not measured"


def test_a_theory_tab_counts_as_a_switch() -> None:
    app = {"switch_theory_cold_seconds": 0.3, "theory_tab_optimisation_seconds": 1.3, "switch_carrier_cold_seconds": 0.5}
    switch = rows_by_figure(_targets(results(app=app)))[TARGETS["app_page_switch_seconds"].figure]
    assert (switch["value"], switch["status"]) == (1.3, "missed")


def test_the_report_prints_each_figure_beside_its_target_and_the_peer() -> None:
    run = results(training={"rope": {"128": training(600, 100, 0.5, 2.0)}})
    run["training"]["rope"]["128"]["speedup"] = 6.0
    run["targets"] = _targets(run)
    text = render(run)
    line = next(line for line in text.splitlines() if line.startswith("| training steps/s, RoPE, d_model 128"))
    assert "600 steps/s" in line and "100 steps/s" in line and "≥ 5× the peer's" in line and "6.00×" in line
    assert "**met**" in line
    assert "2 met, 0 missed, 0 not measured." in text


@pytest.mark.parametrize("argv", [["--quick"], ["--parts", "training", "evaluation"], ["--no-peer"],
                                  ["--widths", "64"]])
def test_only_the_full_run_writes_the_committed_results(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "pass --out DIR" in capsys.readouterr().err
    assert RESULTS.name == "results"

"""Length by length: the app measures and caches each length on its own to count them on a bar; the
numbers must be those of one batched call, and the bar must count each length once."""

from __future__ import annotations

import dataclasses
import time

import pytest

from lengen.store import RunStore
from lengen_core.analysis.evaluate import LengthError, evaluate
from lengen_core.analysis.sequence import evaluate_sequence
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.initial import initial_model
from lengen_core.training import train
from ui.runs import Progress, evaluation, length_by_length

RETRIEVAL = with_changes(RunConfig(), offset=5, train_length=16, seed=0)
SHIFT = with_changes(RETRIEVAL, task="shift", n_layers=1, n_heads=2)


def numbers(report) -> dict:
    """Everything a report says except how long it took."""
    return {k: v.tolist() if hasattr(v, "tolist") else v for k, v in dataclasses.asdict(report).items()
            if k != "seconds"}


def test_one_length_at_a_time_gives_the_batched_numbers() -> None:
    model, lengths = initial_model(RETRIEVAL), [16, 64, 1024, 5000]
    batched = evaluate(model, RETRIEVAL, lengths, samples=64)
    alone = [evaluate(model, RETRIEVAL, [n], samples=64)[0] for n in lengths]
    assert [numbers(r) for r in alone] == [numbers(r) for r in batched]
    assert len({r.accuracy for r in batched} | {r.target_mass for r in batched}) > 2  # not all alike


def test_full_sequence_evaluation_one_length_at_a_time_gives_the_batched_numbers() -> None:
    model, lengths = initial_model(SHIFT), [16, 32, 64]
    batched = evaluate_sequence(model, SHIFT, lengths, samples=8)
    alone = [evaluate_sequence(model, SHIFT, [n], samples=8)[0] for n in lengths]
    assert [numbers(r) for r in alone] == [numbers(r) for r in batched]


class Recorder:
    """Stands in for the bar: records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int | None]] = []

    def at(self, done: int, lengths: int, length: int | None) -> None:
        self.calls.append((done, lengths, length))


def test_the_bar_counts_each_length_once_in_order() -> None:
    recorder, measured = Recorder(), []
    results = length_by_length([16, 32, 64], lambda n: measured.append(n) or n * 2, recorder, "Evaluating")
    assert results == [32, 64, 128] and measured == [16, 32, 64]
    assert recorder.calls == [(0, 3, 16), (1, 3, 32), (2, 3, 64), (3, 3, None)]


def test_the_apps_evaluation_is_the_batched_one_and_counts_every_length() -> None:
    run = train(with_changes(RETRIEVAL, steps=5, seed=321), "cpu")
    RunStore().save(run)
    lengths = (16, 64, 256)
    recorder = Recorder()
    shown = evaluation(run.run_id, lengths, 32, recorder)
    assert [numbers(r) for r in shown] == [numbers(r) for r in evaluate(run.model, run.config, list(lengths), samples=32)]
    assert [call for call in recorder.calls if call[2] is not None] == [(0, 3, 16), (1, 3, 64), (2, 3, 256)]
    again = Recorder()
    assert [numbers(r) for r in evaluation(run.run_id, lengths, 32, again)] == [numbers(r) for r in shown]  # cached
    assert len(again.calls) == 4


def test_the_apps_evaluation_refuses_a_sweep_as_one_request_before_measuring_any_length() -> None:
    run = train(with_changes(RETRIEVAL, steps=5, seed=322), "cpu")
    RunStore().save(run)
    recorder = Recorder()
    with pytest.raises(LengthError, match="must be larger than the offset"):
        evaluation(run.run_id, (64, 3), 32, recorder)
    assert recorder.calls == []


def test_the_bar_text_says_run_and_lengths() -> None:
    progress = Progress("Comparing", runs=3)
    progress.run, progress.done, progress.lengths, progress.length = 1, 4, 9, 1024
    assert progress.text() == "Comparing: run 2 of 3, 4 of 9 lengths done, now L = 1,024"
    assert progress.fraction() == pytest.approx((1 + 4 / 9) / 3)
    single = Progress("Evaluating")
    single.done, single.lengths, single.length = 2, 5, None
    assert single.text() == "Evaluating: 2 of 5 lengths done" and single.fraction() == pytest.approx(0.4)
    progress.done, progress.length, progress.now = 9, None, "the carrier"
    assert progress.text() == "Comparing: run 2 of 3, 9 of 9 lengths done, now the carrier"
    progress.run, progress.lengths, progress.now = 2, 0, None
    assert progress.text() == "Comparing: run 3 of 3" and progress.fraction() == pytest.approx(2 / 3)
    rules = Progress("Reading under the rules", runs=4, unit="rule")  # what the Dilution page's rules count
    rules.run, rules.done, rules.lengths, rules.length = 1, 3, 13, 128
    assert rules.text() == "Reading under the rules: rule 2 of 4, 3 of 13 lengths done, now L = 128"


class Slot:
    """Stands in for the page's placeholder: records what is drawn in it."""

    def __init__(self) -> None:
        self.drawn: list[tuple[float, str]] = []
        self.cleared_after = None

    def progress(self, value: float, text: str) -> None:
        assert self.cleared_after is None, "drawn after the work ended"
        self.drawn.append((value, text))

    def empty(self) -> None:
        self.cleared_after = len(self.drawn)


@pytest.fixture
def slot(monkeypatch) -> Slot:
    placeholder = Slot()
    monkeypatch.setattr("ui.runs.st.empty", lambda: placeholder)
    monkeypatch.setattr("ui.runs.BAR_DELAY", 0.05)
    return placeholder


def test_quick_work_never_draws_a_bar(slot) -> None:
    assert length_by_length([16, 32], lambda n: n, None, "Evaluating") == [16, 32]
    assert slot.drawn == [] and slot.cleared_after == 0


def test_slow_work_draws_the_bar_and_removes_it_at_the_end(slot) -> None:
    def slow(n: int) -> int:
        time.sleep(0.1)
        return n

    length_by_length([16, 32, 64], slow, None, "Evaluating")
    texts = [text for _, text in slot.drawn]
    assert "Evaluating: 0 of 3 lengths done, now L = 16" in texts
    assert "Evaluating: 2 of 3 lengths done, now L = 64" in texts
    assert [value for value, _ in slot.drawn] == sorted(value for value, _ in slot.drawn)  # never goes back
    assert slot.cleared_after == len(slot.drawn)

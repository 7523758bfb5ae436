"""Training as an iterator: progress per step, stopping at any step, early stop, device choice."""

from __future__ import annotations

import pytest
import torch

import lengen_core.training as training_module
from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Progress, Training, resolve_device, train

SHORT = with_changes(RunConfig(), steps=12)


def test_progress_counts_every_step_and_finishes_on_the_last():
    progress = list(Training(SHORT, "cpu"))
    assert all(isinstance(p, Progress) for p in progress)
    assert [p.step for p in progress] == list(range(1, 13))
    assert [p.finished for p in progress] == [False] * 11 + [True]
    assert all(p.total_steps == 12 and not p.stopped_early for p in progress)
    elapsed = [p.elapsed_seconds for p in progress]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0


def test_finish_reports_what_was_done():
    training = Training(SHORT, "cpu")
    progress = list(training)
    run = training.finish()
    assert run.steps == 12 and run.config == SHORT and run.device == "cpu"
    assert run.history["step"] == list(range(1, 13))
    assert run.history["loss"] == [p.loss for p in progress]
    assert run.history["accuracy"] == [p.accuracy for p in progress]
    assert run.loss == progress[-1].loss and run.train_accuracy == progress[-1].accuracy
    assert not run.stopped_early and not run.model.training


def test_breaking_out_then_finish_keeps_the_steps_done():
    training = Training(SHORT, "cpu")
    for progress in training:
        if progress.step == 5:
            break
    run = training.finish()
    assert run.steps == 5
    assert len(run.history["loss"]) == 5
    assert not run.stopped_early


def test_breaking_out_gives_the_same_weights_as_a_shorter_budget():
    training = Training(SHORT, "cpu")
    for progress in training:
        if progress.step == 5:
            break
    stopped, short = training.finish(), train(with_changes(SHORT, steps=5), "cpu")
    assert short.history == stopped.history
    assert all(
        torch.equal(a, b) for a, b in zip(stopped.model.state_dict().values(), short.model.state_dict().values())
    )


def test_finish_before_any_step_is_an_empty_run():
    run = Training(SHORT, "cpu").finish()
    assert run.steps == 0 and run.history["step"] == []


def _first_step_holding(accuracies: list[float], target: float, patience: int) -> int | None:
    """The first step after which the last `patience` accuracies were all ≥ target."""
    for step in range(patience, len(accuracies) + 1):
        if min(accuracies[step - patience : step]) >= target:
            return step
    return None


def test_early_stop_when_the_target_is_held_for_patience_steps():
    config = with_changes(RunConfig(), steps=400, target_accuracy=0.5, patience=5)
    progress = list(Training(config, "cpu"))
    accuracies = [p.accuracy for p in progress]
    stop = _first_step_holding(accuracies, 0.5, 5)
    assert stop is not None and stop < 400  # the target is reached, so the test says something
    assert len(progress) == stop
    assert progress[-1].stopped_early and progress[-1].finished
    assert not any(p.finished or p.stopped_early for p in progress[:-1])


def test_a_trivial_target_stops_after_exactly_patience_steps():
    run = train(with_changes(RunConfig(), steps=50, target_accuracy=0.0, patience=3), "cpu")
    assert run.steps == 3 and run.stopped_early


def test_keep_training_ignores_the_target():
    run = train(with_changes(RunConfig(), steps=10, target_accuracy=0.0, patience=3, keep_training=True), "cpu")
    assert run.steps == 10 and not run.stopped_early


def test_auto_picks_the_best_available_device():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert resolve_device("auto") == torch.device(expected)
    assert resolve_device() == torch.device(expected)
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_auto_is_the_cpu_without_an_accelerator():
    if torch.backends.mps.is_available():
        pytest.skip("Apple MPS is available here")
    assert resolve_device("auto") == torch.device("cpu")
    assert Training(SHORT).device == torch.device("cpu")


def test_missing_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device 'cuda' is not available on this machine: use auto or cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="not available"):
        Training(SHORT, "cuda")


def test_an_unknown_device_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown device 'tpu': allowed auto, cpu, cuda, mps"):
        resolve_device("tpu")


@pytest.mark.gpu
def test_training_on_cuda_starts_from_the_cpu_weights_and_learns():
    config = RunConfig()
    on_cpu, on_cuda = Training(config, "cpu"), Training(config, "cuda")
    for a, b in zip(on_cpu.model.state_dict().values(), on_cuda.model.state_dict().values()):
        assert b.device.type == "cuda"
        assert torch.equal(a, b.cpu())  # weights come from a CPU generator on every device
    for _ in on_cuda:
        pass
    run = on_cuda.finish()
    assert run.device.startswith("cuda")
    (report,) = evaluate(run.model, config, [config.task.train_length], samples=1024)
    assert report.accuracy >= 0.99


@pytest.mark.gpu
def test_a_cuda_training_sees_the_cpu_trainings_batches_and_ends_near_its_weights():
    """The batches come from a CPU generator on every device: the same data on CUDA as on the CPU, so
    the two trainings of one config and seed differ only by float rounding (stated tolerance: 1e-3
    relative on the losses and weights after 20 steps; not yet run on a GPU)."""
    config = with_changes(RunConfig(), steps=20, keep_training=True)
    on_cpu, on_cuda = Training(config, "cpu"), Training(config, "cuda")
    assert on_cuda.data.device.type == "cpu"
    for _ in zip(on_cpu, on_cuda):
        pass
    assert on_cuda.history["loss"] == pytest.approx(on_cpu.history["loss"], rel=1e-3)
    for name, weights in on_cpu.model.state_dict().items():
        torch.testing.assert_close(on_cuda.model.state_dict()[name].cpu(), weights, rtol=1e-3, atol=1e-4)


@pytest.fixture
def several_threads():
    """The session's single-thread setting undone: the default thread count of a 2-core machine or more."""
    previous = torch.get_num_threads()
    torch.set_num_threads(max(2, torch.get_num_interop_threads(), previous))
    yield torch.get_num_threads()
    torch.set_num_threads(previous)


def test_same_config_and_seed_give_the_same_bytes_on_several_threads(several_threads):
    """Without deterministic kernels two trainings on 2 threads differed by up to 7e-7 (the embedding
    gather's backward accumulates in a thread-dependent order); the bytes must match exactly."""
    assert several_threads >= 2
    config = with_changes(RunConfig(), steps=150, keep_training=True)
    first, second = train(config, "cpu"), train(config, "cpu")
    for name, tensor in first.model.state_dict().items():
        assert tensor.numpy().tobytes() == second.model.state_dict()[name].numpy().tobytes(), name
    assert first.history == second.history


def test_training_restores_the_callers_deterministic_setting():
    assert not torch.are_deterministic_algorithms_enabled()
    train(SHORT, "cpu")
    assert not torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        train(SHORT, "cpu")
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


LEARNED_SHORT = with_changes(RunConfig(), encoding="learned", d_model=16, train_length=12, max_positions=64,
                             steps=15, learning_rate=0.05, length_mode="sampled")


def _trained_table(config: RunConfig, monkeypatch: pytest.MonkeyPatch, windows: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if not windows:
        monkeypatch.setattr(training_module, "reachable_rows", lambda model, config: [])
    training = Training(config, "cpu")
    assert len(training.windows) == int(windows)
    start = training.model.encoding.table.detach().clone()
    list(training)
    monkeypatch.undo()
    return start, training.finish().model.encoding.table.detach()


def test_stepping_only_the_reachable_rows_changes_nothing_but_the_time(monkeypatch):
    """Adam on the rows a training reaches gives the weights Adam on the whole table gives: the rows
    past the training length stay exactly at their initial values either way."""
    start, windowed = _trained_table(LEARNED_SHORT, monkeypatch, windows=True)
    _, whole = _trained_table(LEARNED_SHORT, monkeypatch, windows=False)
    L = LEARNED_SHORT.task.train_length
    assert torch.equal(windowed[L:], start[L:]) and torch.equal(whole[L:], start[L:])
    assert not torch.equal(windowed[:L], start[:L])  # the reachable rows did train
    torch.testing.assert_close(windowed[:L], whole[:L], rtol=1e-5, atol=1e-6)


def test_weight_decay_steps_the_whole_table(monkeypatch):
    """Weight decay moves rows no gradient reaches, so with it the whole table is stepped."""
    decayed = with_changes(LEARNED_SHORT, weight_decay=0.1)
    start, trained = _trained_table(decayed, monkeypatch, windows=False)
    assert Training(decayed, "cpu").windows == []
    L = decayed.task.train_length
    assert not torch.equal(trained[L:], start[L:])

"""Training as an iterator of progress reports: a UI can stream it and stop at any step.

    training = Training(config, device="auto")
    for progress in training:      # one `Progress` per optimisation step
        ...                        # break at any time to stop
    run = training.finish()        # a `Run`: the config, the weights and what happened

Every random stream comes from the run's seed through explicit generators (weights on the CPU,
so the same seed gives the same initial weights on every device; batches from a CPU generator,
moved to the training device, so every device sees the same data);
the global RNG is never touched. Each step runs with torch's deterministic algorithms: with two or
more intra-op threads the backward of the embedding gather accumulates in a thread-dependent order
otherwise (two trainings of one config on 2 threads differed by up to 7e-7), so the same config and
seed give the same bytes on the same machine at any thread count. The caller's setting is restored
after each step.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch
import torch.nn.functional as F

from lengen_core.analysis.verdict import Verdict, judge
from lengen_core.config import RunConfig
from lengen_core.models.initial import initial_model
from lengen_core.tasks import query_start, sample_batch

PROBE_SHARE = 0.25  # live probes may take at most this share of a training's step time (Training)
DATA_SEED_OFFSET = 1_000_003  # keeps the data stream apart from the weight stream of the same seed


FUSED_ADAM = frozenset({"cpu", "cuda"})  # devices whose Adam step runs as one fused kernel per parameter


@dataclass(frozen=True)
class RowWindow:
    """The rows of a position table a training can reach (positions 0 … L_train-1), as a parameter of
    their own that shares the table's memory: the optimiser steps them alone. With no weight decay,
    Adam leaves a row whose gradient has always been zero exactly where it is (its moments stay 0, so
    its step is 0/ε), so stepping the rest of a 4,096-row table, as a plain optimiser does, changes
    nothing but the time: it was most of a learned-position step's."""

    table: torch.nn.Parameter
    rows: torch.nn.Parameter  # table[:reach], the same memory

    def take_gradient(self) -> None:
        gradient = self.table.grad
        self.rows.grad = None if gradient is None else gradient[: self.rows.shape[0]]


def reachable_rows(model: torch.nn.Module, config: RunConfig) -> list[RowWindow]:
    """A window on each trained position table with rows no training batch reaches, when no weight
    decay would move those rows (it would: an optimiser term, not a gradient)."""
    if config.train.weight_decay:
        return []
    reach = config.task.train_length  # no batch is longer (lengen_core.tasks.training_length)
    windows = []
    for module in model.modules():
        table = getattr(module, "table", None)
        if getattr(module, "trained_positions", False) and isinstance(table, torch.nn.Parameter) \
                and table.shape[0] > reach:
            windows.append(RowWindow(table, torch.nn.Parameter(table.data[:reach])))
    return windows


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` picks CUDA, then Apple MPS, then the CPU; an unavailable explicit choice is an error."""
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    available = {"cpu": True, "cuda": cuda, "mps": mps}
    if name not in available:
        raise ValueError(f"unknown device {name!r}: allowed auto, cpu, cuda, mps")
    if not available[name]:
        raise ValueError(f"device {name!r} is not available on this machine: use auto or cpu")
    return torch.device(name)


_deterministic_lock = threading.Lock()
_deterministic_users = 0
_caller_setting = (False, False)


@contextmanager
def deterministic_algorithms(device: torch.device) -> Iterator[None]:
    """torch's deterministic algorithms while inside, the caller's setting restored when the last
    concurrent user (trainings may run in threads) leaves. On the CPU a missing deterministic kernel
    is an error; elsewhere a warning (CUDA needs CUBLAS_WORKSPACE_CONFIG for bit-identical matmuls)."""
    global _deterministic_users, _caller_setting
    with _deterministic_lock:
        if _deterministic_users == 0:
            _caller_setting = (torch.are_deterministic_algorithms_enabled(),
                               torch.is_deterministic_algorithms_warn_only_enabled())
            torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
        _deterministic_users += 1
    try:
        yield
    finally:
        with _deterministic_lock:
            _deterministic_users -= 1
            if _deterministic_users == 0:
                torch.use_deterministic_algorithms(_caller_setting[0], warn_only=_caller_setting[1])


@dataclass(frozen=True)
class Progress:
    step: int  # steps done, 1-based
    total_steps: int
    loss: float
    accuracy: float  # on this step's batch, at the query
    steps_per_second: float
    elapsed_seconds: float
    finished: bool  # the last step of this training (budget spent or early stop)
    stopped_early: bool
    probe: ProbeReading | None = None  # what the training's probe read from the weights, every `probe_every` steps


@dataclass
class Run:
    """A trained run: what the store saves and every analysis reads."""

    config: RunConfig
    model: torch.nn.Module
    device: str
    steps: int
    train_seconds: float
    loss: float
    train_accuracy: float
    stopped_early: bool
    history: dict[str, list[float]] = field(default_factory=dict)
    verdict: Verdict | None = None  # judged when trained (lengen_core.analysis.verdict); None only before that
    trained_on: str = ""  # the device it was trained on ("" = `device`); `device` is where the model is now

    @property
    def training_device(self) -> str:
        return self.trained_on or self.device

    @property
    def run_id(self) -> str:
        return self.config.run_id()


class ProbeReading(Protocol):
    """What a live probe returns (lengen_core.analysis.horizon.Probe is one): a frozen dataclass
    with these fields; the training fills in `seconds` with the time it took."""

    step: int
    horizon: int | None
    m_out: float | None
    seconds: float


ProbeCallback = Callable[[torch.nn.Module, RunConfig, int], ProbeReading]  # (model in eval mode, config, steps done)


class Training:
    def __init__(self, config: RunConfig, device: str = "auto", start: Mapping[str, torch.Tensor] | None = None,
                 probe: ProbeCallback | None = None, probe_every: int = 0, probe_estimate: float = 0.0,
                 probe_share: float = PROBE_SHARE) -> None:
        """`start`: the weights to start from instead of the seed's initialisation, for a run that
        continues another (`config.train.continues`: the caller reads that run's weights).
        `probe`: a callback that reads the weights every `probe_every` steps or more (0: never),
        e.g. lengen_core.analysis.horizon.live_probe, as the server's trainings do; the training knows
        nothing of what it computes but its step, horizon and m_out, recorded in the history as
        probe_step, horizon, m_out and probe_seconds. It must change nothing. A due probe runs only
        while the probes' time stays within `probe_share` of the steps' time so far
        (`_probe_affordable`; `probe_estimate`: the seconds the first probe is expected to take), so a
        probe is never due at step 1 and a large vocabulary gets fewer of them: what they add to a
        training is bounded before it starts."""
        if bool(start) != bool(config.train.continues):
            raise ValueError("a run starts from given weights exactly when its config names the run it continues")
        if probe_every and probe is None:
            raise ValueError("probe_every needs a probe to call")
        self.config = config
        self.device = resolve_device(device)
        seed = config.train.seed
        self.model = initial_model(config)
        if start:
            self.model.load_state_dict(start)
        self.model = self.model.to(self.device)
        # The batches come from a CPU generator and move to the device: every device sees the same data
        self.data = torch.Generator().manual_seed(seed + DATA_SEED_OFFSET)
        self.windows = reachable_rows(self.model, config)
        windowed = {id(window.table) for window in self.windows}
        parameters = [p for p in self.model.parameters() if id(p) not in windowed]
        parameters += [window.rows for window in self.windows]
        self.optimizer = torch.optim.Adam(
            parameters, lr=config.train.learning_rate, weight_decay=config.train.weight_decay,
            fused=self.device.type in FUSED_ADAM,
        )
        self.probe, self.probe_every, self.probe_share = probe, probe_every, probe_share
        self.probe_seconds = 0.0  # spent on live probes so far (not counted in `seconds`)
        self._next_probe_seconds = probe_estimate  # the last probe's time; before the first, the estimate
        self.clock = time.perf_counter  # a test may replace it
        self.history: dict[str, list[float]] = {"step": [], "loss": [], "accuracy": []}
        if probe_every:
            self.history.update(probe_step=[], horizon=[], m_out=[], probe_seconds=[])
        self.steps_done = 0
        self.seconds = 0.0
        self.stopped_early = False
        self._recent: deque[float] = deque(maxlen=config.train.patience)

    def step(self) -> tuple[float, float]:
        tokens, targets = sample_batch(self.config.task, self.config.train.batch_size, self.data)  # (B, Tq)
        tokens, targets = tokens.to(self.device), targets.to(self.device)  # no copy on the CPU
        logits = self.model(tokens, query_start=query_start(self.config.task, tokens.shape[1]))  # (B, Tq, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        self.model.zero_grad(set_to_none=True)
        loss.backward()
        for window in self.windows:
            window.take_gradient()
        self.optimizer.step()
        accuracy = (logits.argmax(-1) == targets).float().mean()
        return float(loss.detach()), float(accuracy)

    def _reached_target(self) -> bool:
        train = self.config.train
        full = len(self._recent) == train.patience
        return full and not train.keep_training and min(self._recent) >= train.target_accuracy

    def __iter__(self) -> Iterator[Progress]:
        total = self.config.train.steps
        self.model.train()
        while self.steps_done < total and not self.stopped_early:
            start = self.clock()
            with deterministic_algorithms(self.device):
                loss, accuracy = self.step()
            self.seconds += self.clock() - start
            self.steps_done += 1
            self._recent.append(accuracy)
            self.stopped_early = self._reached_target()
            for key, value in (("step", self.steps_done), ("loss", loss), ("accuracy", accuracy)):
                self.history[key].append(value)
            finished = self.stopped_early or self.steps_done == total
            probe = self._probe() if self._probe_affordable(finished) else None
            yield Progress(
                step=self.steps_done,
                total_steps=total,
                loss=loss,
                accuracy=accuracy,
                steps_per_second=self.steps_done / max(self.seconds, 1e-9),
                elapsed_seconds=self.seconds,
                finished=finished,
                stopped_early=self.stopped_early,
                probe=probe,
            )

    def _probe_affordable(self, finished: bool) -> bool:
        """A probe now: `probe_every` steps after the last one (or the last step), and the probes'
        time with this one's expected time (the last one's, or the given estimate for the first) within
        `probe_share` of the steps' time so far."""
        if not self.probe_every:
            return False
        last = self.history["probe_step"][-1] if self.history["probe_step"] else 0
        if self.steps_done - last < self.probe_every and not (finished and self.steps_done > last):
            return False
        return self.probe_seconds + self._next_probe_seconds <= self.probe_share * self.seconds

    def _probe(self) -> ProbeReading:
        self.model.eval()
        start = self.clock()
        try:
            probe = self.probe(self.model, self.config, self.steps_done)
        finally:
            self.model.train()
        spent = self.clock() - start
        probe = replace(probe, seconds=spent)
        self.probe_seconds += spent
        self._next_probe_seconds = spent
        for key, value in (("probe_step", probe.step), ("horizon", probe.horizon), ("m_out", probe.m_out),
                           ("probe_seconds", spent)):
            self.history[key].append(value)
        return probe

    def finish(self) -> Run:
        """The run, with its verdict judged on fresh sequences (a few hundredths of a second for one head)."""
        self.model.eval()
        history = self.history
        return Run(
            config=self.config,
            model=self.model,
            device=str(self.device),
            steps=self.steps_done,
            train_seconds=self.seconds,
            loss=history["loss"][-1] if history["loss"] else float("nan"),
            train_accuracy=history["accuracy"][-1] if history["accuracy"] else float("nan"),
            stopped_early=self.stopped_early,
            history={key: list(values) for key, values in history.items()},
            verdict=judge(self.model, self.config) if self.steps_done or self.config.train.steps == 0 else None,
            trained_on=str(self.device),
        )


def train(config: RunConfig, device: str = "auto", start: Mapping[str, torch.Tensor] | None = None) -> Run:
    """Train to the end (or early stop) without observing progress."""
    training = Training(config, device, start)
    for _ in training:
        pass
    return training.finish()

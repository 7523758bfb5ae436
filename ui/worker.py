"""A background training worker: a thread iterates `Training` and records progress in a plain object.

It never calls Streamlit; the Train page polls `TrainingJob.snapshot()` from a fragment. Stop sets
a flag the thread reads between steps. A run stopped at step n is saved with `steps = n`: training
has no schedule tied to the step budget, so that config reproduces exactly the same weights.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

from lengen_core.config import RunConfig, with_changes
from lengen_core.store import RunStore
from lengen_core.training import Progress, Training


@dataclass(frozen=True)
class JobSnapshot:
    progress: Progress | None
    history: dict[str, list[float]]
    done: bool
    run_id: str | None  # the stored run, once done
    stopped: bool  # by the user
    error: str | None


@dataclass
class TrainingJob:
    config: RunConfig
    store: RunStore
    device: str = "auto"
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _progress: Progress | None = None
    _history: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "loss": [], "accuracy": []})
    _done: bool = False
    _run_id: str | None = None
    _error: str | None = None
    _thread: threading.Thread | None = None

    def start(self) -> TrainingJob:
        self._thread = threading.Thread(target=self._work, name=f"train-{self.config.run_id()}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def snapshot(self) -> JobSnapshot:
        with self._lock:
            history = {key: list(values) for key, values in self._history.items()}
            return JobSnapshot(self._progress, history, self._done, self._run_id, self._stop.is_set(), self._error)

    def _work(self) -> None:
        try:
            training = Training(self.config, self.device)
            for progress in training:
                with self._lock:
                    self._progress = progress
                    for key, value in (("step", progress.step), ("loss", progress.loss), ("accuracy", progress.accuracy)):
                        self._history[key].append(value)
                if self._stop.is_set():
                    break
            run = training.finish()
            if run.steps < self.config.train.steps and not run.stopped_early:
                run = dataclasses.replace(run, config=with_changes(run.config, steps=run.steps))
            self.store.save(run)
            with self._lock:
                self._run_id = run.run_id
        except Exception as error:  # shown on the page as a message, never a traceback
            with self._lock:
                self._error = f"{type(error).__name__}: {error}"
        finally:
            with self._lock:
                self._done = True

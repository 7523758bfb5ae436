"""A training in a child process of its own (`TrainingProcess`, the pool's `isolate=True` mode), and
the child's side of the pipe (`serve_child`).

    child = TrainingProcess(store, device="cpu", threads=1)
    outcome, run_id = child.train(config, report, stop, keep)   # ("done", id) or ("cancelled", None)

Messages on the pipe: the parent sends ("train", (config, commands)) (the commands already given: a
training that starts paused or paced is so from its first step), ("pause", _), ("resume", _), ("advance", n)
(n steps, then pause), ("pace", steps per second) (`lengen.stepping.StepGate`), ("stop", _),
then ("save" | "discard", _)
when asked, ("calibrate", _) between trainings, and ("exit", _); the child answers a calibrate with
("speeds", (speeds, device)) (`calibration.measure_references`: the reference runs timed in the child,
after its warm-up step), a training with ("progress", Progress) per step, ("view", LiveView)
now and then (`lengen_core.analysis.watch`: every few steps, and where a paused training stopped), then ("stopped", _)
(a stop arrived: save or discard?), ("cancelled", _), ("done", run id) or ("failed", message). The run is
saved and reported done before its first-visit numbers are measured; the child measures them next, before
it reads the next request (`save_run`). A paused child waits on the pipe, taking no step, until a command arrives.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

import torch

from lengen.budget import MEMORY_ENV, Budgets
from lengen.calibration import measure_references, record
from lengen.first_visit import save_run
from lengen.lineage import starting_weights
from lengen.runtime import limit_heap_growth
from lengen.stepping import StepGate
from lengen.store import RunStore
from lengen_core.analysis.horizon import live_probe, probe_interval, probe_seconds_estimate
from lengen_core.analysis.watch import LiveView, live_view, view_due
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Progress, Training

Outcome = Literal["done", "cancelled"]
CALIBRATE_SECONDS = 120.0  # a new child's torch import, warm-up and reference runs: ~4 CPU s, several times that loaded


class TrainingProcess:
    """One training at a time in a child process of its own, reused from job to job.

    Serving and training then never share a Python interpreter: a busy server does not slow the
    training through the GIL, and a training that crashes (out of memory, a kill) takes down
    only its child, which is replaced for the next job. The child saves the run in the store
    itself (atomically), so only progress and the run id cross the pipe.

    The child is a fresh `python -c` started from the project root, not a multiprocessing spawn:
    a spawn re-imports the parent's `__main__`, which under `streamlit run` is the app script.
    """

    def __init__(self, store: RunStore, device: str, threads: int) -> None:
        self.store, self.device, self.threads = store, device, threads
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._asked = False  # a calibrate sent and not answered yet: never a second behind it (the child answers in order)

    def start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        ours, theirs = Pipe()  # a local duplex pipe; the child gets its end's descriptor
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", CHILD_COMMAND, str(theirs.fileno()), str(self.store.root.resolve()),
                 self.device, str(self.threads)],
                cwd=PROJECT_ROOT, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._conn, self._asked = ours, False

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def train(
        self, config: RunConfig, report: Callable[[Progress], None], stop: threading.Event, keep: Callable[[], bool],
        commands: Callable[[], list[tuple[str, float]]] = list, view: Callable[[LiveView], None] = lambda _: None,
    ) -> tuple[Outcome, str | None]:
        """Train `config` in the child; `commands()` hands over pause / resume / advance commands to send,
        `view` takes each live view the child sends."""
        self.start()
        assert self._conn is not None and self._process is not None
        conn, process = self._conn, self._process
        conn.send(("train", (config, commands())))
        stop_sent = False
        while True:
            for command in commands():
                conn.send(command)
            if stop.is_set() and not stop_sent:
                conn.send(("stop", None))
                stop_sent = True
            try:
                if not conn.poll(0.05):
                    if process.poll() is not None:
                        raise EOFError
                    continue
                kind, payload = conn.recv()
            except (EOFError, OSError):
                self.close()
                raise ChildProcessError(
                    f"the training process ended unexpectedly (exit code {process.poll()}); nothing was saved"
                ) from None
            self._asked = self._asked and kind != "speeds"
            if (outcome := answer(kind, payload, report, view, keep, conn.send)) is not None:
                return outcome

    def calibrate(self, timeout: float = CALIBRATE_SECONDS) -> dict[str, float] | None:
        """The reference runs' speeds (`calibration.measure_references`) timed in the child (started here if it
        is not running), the warm-up's answer for a child just started; None when it died or did not answer
        within `timeout` (its answer then comes with the next training's messages, `answer` records it)."""
        self.start()
        assert self._conn is not None and self._process is not None
        conn, process = self._conn, self._process
        deadline = time.monotonic() + timeout
        try:
            if not self._asked:  # a child still warming up at a heavy load: the one asked before still counts
                conn.send(("calibrate", None))
                self._asked = True
            while (left := deadline - time.monotonic()) > 0:
                if conn.poll(min(left, 0.5)):
                    kind, payload = conn.recv()
                    if kind == "speeds":
                        self._asked = False
                        return payload[0]
                elif process.poll() is not None:
                    raise EOFError
        except (EOFError, OSError):
            self.close()  # the next training starts a new child
        return None

    def close(self, timeout: float = 5.0) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send(("exit", None))
            self._conn.close()
        if self._process is not None:
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout)
        self._process = self._conn = None
        self._asked = False


class TrainingFailed(RuntimeError):
    """The training raised in its child process; the message is the child's error, on one line."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def answer(kind: str, payload: Any, report: Callable[[Progress], None], view: Callable[[LiveView], None],
           keep: Callable[[], bool], reply: Callable[[tuple[str, None]], None]) -> tuple[Outcome, str | None] | None:
    """One message of a training's protocol (`serve_training`'s, from a child process or a Ray actor): hand on
    its progress or view; `reply` save or discard to a stopped training; the outcome once it ended
    (None before); TrainingFailed when the training raised."""
    if kind == "progress":
        report(payload)
    elif kind == "view":
        view(payload)
    elif kind == "speeds":  # a calibrate answered after its wait had given up: still this process's speed
        record(*payload)
    elif kind == "stopped":
        reply(("save" if keep() else "discard", None))
    elif kind == "cancelled":
        return "cancelled", None
    elif kind == "done":
        return "done", payload
    else:  # "failed"
        raise TrainingFailed(payload)
    return None


ADDRESS_HEADROOM = 2 << 30  # torch's libraries and thread arenas: an idle training process maps ~0.85 GB
LOG = logging.getLogger(__name__)


def address_limit() -> int:
    """A training process's address-space limit: the request memory budget plus ADDRESS_HEADROOM."""
    return Budgets.from_env().memory_bytes + ADDRESS_HEADROOM


def limit_address_space() -> None:
    """RLIMIT_AS for this (training) process, so a training past its budget fails alone with a
    message instead of pushing the machine into swap or the OOM killer's hands."""
    if os.name == "posix":
        import resource

        limit = address_limit()
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def _out_of_memory() -> str:
    return (f"the training ran out of its memory limit ({address_limit() / 2**30:.1f} GB of address space, from "
            f"{MEMORY_ENV}): choose a smaller batch, a shorter length, a smaller model or fewer layers")


PROJECT_ROOT = Path(__file__).resolve().parents[1]
CHILD_NICENESS = 5  # serving pages goes first when the cores are short; an idle machine trains at full speed
CHILD_COMMAND = "import sys; from lengen.training_process import serve_child; serve_child(sys.argv[1:])"


def _drive(training: Training, conn: Connection, first: list[tuple[str, float]] = ()) -> bool:
    """Take the training's steps, each reported on the pipe, as the parent's commands allow (paused: wait
    for one; paced: wait for the pace, taking commands meanwhile), after the `first` commands; True when a
    stop arrived before the end."""
    gate, steps, viewed, stopping = StepGate(), iter(training), 0, False
    for command in first:
        gate.apply(command)
    while True:
        while not stopping:  # the commands that came; paused: block on the pipe until one comes
            if view_due(training.steps_done, viewed, gate.paused):  # before waiting: where it stopped
                viewed = training.steps_done
                if (seen := live_view(training.model, training.config, viewed)) is not None:
                    conn.send(("view", seen))
            if not conn.poll():
                wait = gate.delay(time.monotonic()) if gate.may_step() else None  # None: until a command comes
                if wait == 0:
                    break
                if not conn.poll(wait):
                    continue  # the pace's wait is over: look again
            kind, value = conn.recv()
            if kind == "stop":
                if training.steps_done:
                    return True
                stopping = True  # a stopped run keeps at least one step, paused or not
            elif kind in ("pause", "resume", "advance", "pace"):
                gate.apply((kind, value))
        gate.starting(time.monotonic())
        progress = next(steps, None)
        if progress is None:
            return stopping
        gate.took_step()
        conn.send(("progress", progress))
        if stopping:
            return True
        if progress.finished:  # a stop that came with the last step still counts
            stopped = False
            while conn.poll():
                stopped = conn.recv()[0] == "stop" or stopped
            return stopped


def serve_child(argv: list[str]) -> None:
    """The child's entry: its pipe end's file descriptor, the store's root, the device, torch threads."""
    fd, root, device, threads = argv
    os.nice(CHILD_NICENESS)
    limit_heap_growth()
    limit_address_space()
    _child_main(Connection(int(fd)), root, device, int(threads))


def reference_speeds(device: str) -> dict[str, float]:
    """`calibration.measure_references` in this training process (or Ray Trainer); empty when it fails (logged):
    the form then says the speed is not measured."""
    try:
        return measure_references(device)
    except Exception:
        LOG.exception("timing the reference runs failed (device %s); the estimate stays unmeasured", device)
        return {}


def live_training(config: RunConfig, device: str, store: RunStore) -> Training:
    """A training as the server runs it: from the weights of the run it continues, if any, with the live
    probes of lengen_core.analysis.horizon (the horizon and m_out predicted every few dozen steps)."""
    return Training(config, device, starting_weights(config, store), probe=live_probe,
                    probe_every=probe_interval(config), probe_estimate=probe_seconds_estimate(config))


def _child_main(conn: Connection, root: str, device: str, threads: int) -> None:
    """The child's loop: ("train", config) -> progress per step, then done / cancelled / failed."""
    torch.set_num_threads(threads)
    store = RunStore(Path(root))
    # One throwaway step loads what torch loads lazily on a first training (optimizer and autograd
    # machinery, ~1.5 s), here at start-up instead of after someone pressed Train.
    try:  # a device that fails here fails the real job with its message; the operator sees it in the log
        Training(with_changes(RunConfig(), d_model=8, train_length=8, batch_size=2), device).step()
    except Exception:
        LOG.exception("the training process's warm-up step failed (device %s); trainings will report why", device)
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return  # the server is gone
        if kind == "exit":
            return
        if kind == "calibrate":  # after the warm-up step above, so torch's lazy imports are not timed
            try:
                conn.send(("speeds", (reference_speeds(device), device)))
            except (EOFError, OSError):
                return
            continue
        if kind != "train":
            continue  # a stop that arrived after its training had ended
        if not serve_training(conn, store, device, payload):
            return


def serve_training(conn: Connection, store: RunStore, device: str, payload) -> bool:
    """One ("train", (config, commands)) request, answered on `conn` as the pipe's protocol says (progress,
    views, then done, cancelled or failed); False when the other end is gone. A Ray actor serves its
    trainings with it too (lengen.ray_pool), over anything with `send`, `recv` and `poll`."""
    try:
        config, first = payload
        training = live_training(config, device, store)
        stopped = _drive(training, conn, first)
        run = training.finish()
        if stopped:
            conn.send(("stopped", None))
            while (verdict := conn.recv()[0]) not in ("save", "discard"):
                pass  # a stop or a pause sent before the parent saw "stopped"
            if verdict != "save":
                conn.send(("cancelled", None))
                return True
        save_run(store, run, lambda run_id: conn.send(("done", run_id)))  # then measured for its first visit
    except (EOFError, BrokenPipeError):
        return False
    except MemoryError:
        conn.send(("failed", _out_of_memory()))
    except Exception as error:  # noqa: BLE001 — sent to the server, which reports it in the status
        text = " ".join(str(error).split())
        # torch's allocator past the address-space limit raises a RuntimeError saying so
        conn.send(("failed", _out_of_memory() if "can't allocate memory" in text else f"{type(error).__name__}: {text}"))
    return True

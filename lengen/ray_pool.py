"""The training pool on a Ray cluster (`LENGEN_RAY_ADDRESS`): every app replica's trainings in one queue.

    pool = RayTrainingPool("10.0.0.5:6379", store)     # TrainingPool's methods, answered by the cluster
    ticket = pool.submit(config, owner=browser, pace=pace)
    pool.status(ticket); pool.pause(ticket); pool.advance(ticket, 10); pool.stop(ticket)
    pool.owned(browser)                                 # a reload on another replica finds its training

The queue is the one TrainingPool of lengen.jobs, held by a named detached actor
(`PoolHost`, name POOL_NAME in namespace NAMESPACE) on the head node (not on a replica's node, which
may die), found or made by the first replica (`get_if_exists=True`). So every replica sees one queue, one limit per browser and one training per
identical request, with the budgets, queue limit, pause, step, pace and wall-clock rules of a single
server, because they are that pool's code. Its workers train each on a Ray actor of their own
(`Trainer`, one CPU, and a share of a GPU where the cluster has GPUs), which serves trainings exactly
as a training process does (`training_process.serve_training`), over `_Pipe` instead of a pipe: the pool
host calls the actor's `exchange` every EXCHANGE_SECONDS with the commands given since, and gets the
messages (progress per step, live views, done) it sent meanwhile. The first worker's Trainer, once
warm, times the reference runs of lengen.calibration (`Trainer.speeds`), so the Train form's
estimate (`RayTrainingPool.training_speed`, the pool host's measurement) is the cluster's speed, not the
replica's. Ray places the actors; nothing here schedules.

Faults: an unreachable cluster is `ClusterUnreachable`, never a silent switch to local trainings. A
Trainer whose worker dies fails its training with a message saying so (the run is written by an atomic
rename, so nothing half-written is listed), and the next training gets a new actor. The trainings
belong to the detached pool host, not to the replica that asked: a replica that dies leaves them
running, and its browsers, reloaded onto another replica, find them (`owned`). Ray is imported only
here and only when a pool is made (requirements-ray.txt).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

import torch

from lengen.jobs import TrainingPool
from lengen.runtime import CUBLAS_ENV, CUBLAS_WORKSPACE, ray_modules
from lengen.store import RunStore
from lengen.training_process import answer, reference_speeds, serve_training
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training

ADDRESS_ENV = "LENGEN_RAY_ADDRESS"  # set: the app trains on this Ray cluster; unset: in child processes here
GPU_SHARE_ENV = "LENGEN_RAY_GPU_SHARE"  # the share of one GPU a training asks for, where the cluster has GPUs
DEFAULT_GPU_SHARE = 0.25  # four small trainings to a GPU: one of ours leaves most of an H200 idle
POOL_NAME, NAMESPACE = "lengen-training-pool", "lengen"
EXCHANGE_SECONDS = 0.05  # a command reaches a training within this (pause, step), as a pipe's poll does
HEAD = "node:__internal_head__"  # the head node's own resource: the queue lives there, as Ray's state actors do
CALL_SECONDS = 30.0  # a pool call not answered in this means the cluster is not answering
START_SECONDS = 300.0  # a new Trainer's first answer: a free CPU, a worker process, torch imported
ENV_PREFIXES = ("LENGEN_", CUBLAS_ENV)  # what the pool host and its trainings take from the replica that made it


class ClusterUnreachable(RuntimeError):
    """The Ray cluster cannot be reached or does not answer; the message says where and what to do."""


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterUnreachable(f"{ADDRESS_ENV} is set but Ray is not installed here: pip install -r "
                                 "requirements-ray.txt, or unset it to train on this machine") from None
    return ray


def gpu_share() -> float:
    """The share of one GPU a training asks Ray for where the cluster has GPUs: `$LENGEN_RAY_GPU_SHARE`,
    DEFAULT_GPU_SHARE when unset, 0 to train on CPUs all the same; ClusterUnreachable (the pool cannot be
    made) for anything but a number from 0 to 1."""
    text = os.environ.get(GPU_SHARE_ENV, "").strip()
    if not text:
        return DEFAULT_GPU_SHARE
    try:
        share = float(text)
    except ValueError:
        share = float("nan")
    if not 0 <= share <= 1:
        raise ClusterUnreachable(f"{GPU_SHARE_ENV}={text!r} is not allowed: give the share of one GPU a training "
                                 "asks for, a number from 0 (CPUs only) to 1 (0.25: four trainings to a GPU)")
    return share


@functools.cache
def _remote_trainer():
    return _ray().remote(Trainer)


class _Pipe:
    """The two ends of a training's 'pipe' inside a Trainer actor: `poll` / `recv` / `send` as a
    multiprocessing Connection (for serve_training), `exchange` for the pool host."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._outbox: list[tuple[str, Any]] = []

    def poll(self, timeout: float | None = 0.0) -> bool:
        with self._changed:
            return bool(self._changed.wait_for(lambda: self._inbox, timeout))

    def recv(self) -> tuple[str, Any]:
        with self._changed:
            self._changed.wait_for(lambda: self._inbox)
            return self._inbox.popleft()

    def send(self, message: tuple[str, Any]) -> None:
        with self._changed:
            self._outbox.append(message)
            self._changed.notify_all()

    def exchange(self, commands: list[tuple[str, Any]], wait: float) -> list[tuple[str, Any]]:
        """Hand over `commands`; the messages sent since the last exchange, waiting up to `wait` for one."""
        with self._changed:
            self._inbox.extend(commands)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._outbox, wait)
            messages, self._outbox = self._outbox, []
            return messages


ENDS = ("done", "cancelled", "failed")


class Trainer:
    """A Ray actor that trains one run at a time, as a training process does; `exchange` runs beside
    `train` (the actor has two threads). Trainings are numbered so that a late command of one never
    reaches the next."""

    def __init__(self, root: str, device: str, threads: int) -> None:
        torch.set_num_threads(threads)
        self.store, self.device = RunStore(Path(root)), device
        self._pipes: dict[int, _Pipe] = {}
        self._lock = threading.Lock()
        with contextlib.suppress(Exception):  # as a training process warms up: a failing device fails the job
            Training(with_changes(RunConfig(), d_model=8, train_length=8, batch_size=2), device).step()

    def _pipe(self, number: int) -> _Pipe:
        with self._lock:
            return self._pipes.setdefault(number, _Pipe())

    def pid(self) -> int:
        return os.getpid()

    def speeds(self) -> dict[str, float]:
        """The reference runs timed here, after the warm-up (`calibration.measure_references`; empty if it failed)."""
        return reference_speeds(self.device)

    def train(self, number: int, config, first: list) -> None:
        serve_training(self._pipe(number), self.store, self.device, (config, first))

    def exchange(self, number: int, commands: list, wait: float) -> list:
        messages = self._pipe(number).exchange(commands, wait)
        if any(kind in ENDS for kind, _ in messages):
            with self._lock:
                self._pipes.pop(number, None)
        return messages


class RayTraining:
    """What a pool worker trains in on a cluster: one Trainer actor, made at the first training (or at
    `start`) and kept from job to job; a TrainingProcess to the pool (start, train, close, pid)."""

    def __init__(self, store: RunStore, device: str, options: dict[str, Any]) -> None:
        self.store, self.device, self.options = store, device, options
        self._actor = None
        self._pid: int | None = None
        self._speeds = None  # the Trainer's `speeds` call in flight (calibrate), if any
        self._numbers = itertools.count(1)

    def start(self) -> None:
        ray = _ray()
        if self._pid is not None:  # an actor that answered before: its worker may have died idle (a node lost)
            try:
                ray.get(self._actor.pid.remote(), timeout=CALL_SECONDS)
            except ray.exceptions.RayError:
                self.close()
        if self._actor is None:
            # not waited for: it may wait for a free CPU, and a pool worker warms one up before any job
            self._actor = _remote_trainer().options(**self.options).remote(str(self.store.root), self.device, 1)

    @property
    def pid(self) -> int | None:
        return self._pid

    def calibrate(self, timeout: float = START_SECONDS) -> dict[str, float] | None:
        """As TrainingProcess.calibrate: the reference runs' speeds timed on this worker's Trainer (made here if
        there is none), None when it did not answer within `timeout` (no free CPU yet) or was lost."""
        ray = _ray()
        try:
            self.start()
            if self._speeds is None:  # one at a time: a call still waiting for its CPU is waited for again
                self._speeds = self._actor.speeds.remote()
            speeds = ray.get(self._speeds, timeout=timeout)
            self._speeds = None
            if self._pid is None:
                self._pid = ray.get(self._actor.pid.remote(), timeout=CALL_SECONDS)
            return speeds
        except ray.exceptions.GetTimeoutError:
            return None  # still waiting for a CPU: the next training waits for the same actor
        except ray.exceptions.RayError:
            self.close()  # lost: the next training makes a new one
            return None

    def train(self, config, report, stop, keep, commands=list, view=lambda _: None):
        """As TrainingProcess.train: ("done", run id) or ("cancelled", None); ChildProcessError when the
        actor's worker is lost, TrainingFailed when the training raised."""
        ray = _ray()
        try:
            self.start()
        except ray.exceptions.RayError as error:
            self.close()
            raise ChildProcessError(f"no Ray worker could take the training: {_reason(error)}") from None
        actor, number = self._actor, next(self._numbers)
        finished = actor.train.remote(number, config, commands())
        outgoing, stop_sent, ended = [], False, False
        while True:
            outgoing += commands()
            if stop.is_set() and not stop_sent:
                outgoing.append(("stop", None))
                stop_sent = True
            try:  # a new actor's first answer waits for a free CPU, a worker process and torch's import
                wait = CALL_SECONDS if self._pid is not None else START_SECONDS
                messages = ray.get(actor.exchange.remote(number, outgoing, EXCHANGE_SECONDS), timeout=wait)
                if self._pid is None:
                    self._pid = ray.get(actor.pid.remote(), timeout=CALL_SECONDS)
                if ended:
                    ray.get(finished, timeout=CALL_SECONDS)  # raises what the actor's train raised
            except ray.exceptions.GetTimeoutError:
                self.close()
                raise ChildProcessError(f"no Ray worker answered the training within {wait:.0f} s (no free CPU in the "
                                        "cluster? `ray status` says); nothing was saved: press Train to try again") from None
            except ray.exceptions.RayError as error:
                self.close()
                raise ChildProcessError(f"the training's Ray worker was lost ({_reason(error)}); nothing was "
                                        "saved: press Train to try again") from None
            outgoing = []
            for kind, payload in messages:
                if (outcome := answer(kind, payload, report, view, keep, outgoing.append)) is not None:
                    return outcome
            if ended and not messages:
                raise ChildProcessError("the training's Ray actor ended without an answer; nothing was saved")
            ended = ended or bool(ray.wait([finished], timeout=0)[0])

    def close(self, timeout: float = 5.0) -> None:
        if self._actor is not None:
            with contextlib.suppress(Exception):
                _ray().kill(self._actor)
        self._actor, self._pid, self._speeds = None, None, None


def _reason(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]


def plan(resources: dict[str, float], max_concurrent: int | None = None) -> tuple[int, float]:
    """(trainings at once, the GPU share each asks for) on a cluster with these resources: with GPUs, each
    training asks for `gpu_share()` of one and at most the CPUs and the GPUs' shares train at once; without,
    one per CPU. `max_concurrent` (LENGEN_MAX_TRAININGS) overrides the count."""
    gpus, cpus = resources.get("GPU", 0.0), int(resources.get("CPU", 1))
    share = gpu_share() if gpus else 0.0
    return max_concurrent or max(1, min(cpus, int(gpus / share)) if share else cpus), share


def trainer_options(share: float) -> tuple[str, dict[str, Any]]:
    """The device a Trainer trains on and the Ray options it is made with, for this GPU share: one CPU
    (one torch thread), the share of a GPU (then CUDA), two threads (`train` beside `exchange`), no restart
    (a training cannot resume on a new actor: it fails and says so)."""
    return ("cuda" if share > 0 else "cpu"), {"num_cpus": 1, "num_gpus": share, "max_concurrency": 2, "max_restarts": 0}


class PoolHost:
    """The cluster's one training queue (a named detached actor): a TrainingPool whose workers train on
    Trainer actors. Every replica's calls go through `call`."""

    def __init__(self, root: str, max_concurrent: int, gpu_share: float) -> None:
        device, options = trainer_options(gpu_share)
        self.pool = TrainingPool(RunStore(Path(root)), max_concurrent=max_concurrent, device=device, isolate=True,
                                 process=lambda store, device, _threads: RayTraining(store, device, options))

    def describe(self) -> dict[str, Any]:
        return {"max_concurrent": self.pool.max_concurrent, "device": self.pool.device,
                "root": str(self.pool.store.root)}

    def call(self, method: str, *args, **kwargs):
        return getattr(self.pool, method)(*args, **kwargs)


class RayTrainingPool:
    """TrainingPool's interface for the app, answered by the cluster's PoolHost (made by the first
    replica that asks, with this store, this many trainings at once and this share of a GPU each).
    ClusterUnreachable when the cluster cannot be reached, now or at any later call."""

    shared = True  # trainings outlive this process; a browser finds its own on any replica (`owned`)

    def __init__(self, address: str, store: RunStore, max_concurrent: int | None = None, name: str = POOL_NAME) -> None:
        ray = _ray()
        self.address, self.store, self.name = address, store, name
        if not ray.is_initialized():
            env = {key: value for key, value in os.environ.items() if key.startswith(ENV_PREFIXES)}
            env.setdefault(CUBLAS_ENV, CUBLAS_WORKSPACE)  # a CUDA training is the same bytes each time
            try:
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=False,
                         runtime_env={"py_modules": ray_modules(), "env_vars": env})
            except (ray.exceptions.RayError, ConnectionError, RuntimeError, ValueError) as error:
                raise ClusterUnreachable(_unreachable(address, error)) from None
        try:
            limit, share = plan(ray.cluster_resources(), max_concurrent)
            self._host = ray.remote(PoolHost).options(
                name=name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, num_cpus=0,
                max_concurrency=64, max_restarts=-1, resources={HEAD: 0.001},
            ).remote(str(store.root.resolve()), limit, share)
            described = self._get(self._host.describe.remote())
        except ray.exceptions.RayError as error:
            raise ClusterUnreachable(_unreachable(address, error)) from None
        self.max_concurrent, self.device = described["max_concurrent"], described["device"]
        if Path(described["root"]) != store.root.resolve():
            raise ClusterUnreachable(f"the cluster's training pool {name!r} stores runs in {described['root']}, not in "
                                     f"this replica's {store.root.resolve()}: every replica must mount one store at one path")

    def _get(self, ref):
        ray = _ray()
        try:
            return ray.get(ref, timeout=CALL_SECONDS)
        except ray.exceptions.RayTaskError as error:  # what the pool raised (QueueFull, KeyError, …), as it was
            raise error.cause from None
        except ray.exceptions.RayError as error:
            raise ClusterUnreachable(_unreachable(self.address, error)) from None

    def _call(self, method: str, *args, **kwargs):
        return self._get(self._host.call.remote(method, *args, **kwargs))

    def submit(self, config, owner=None, pace=None) -> int:
        return self._call("submit", config, owner=owner, pace=pace)

    def status(self, ticket: int):
        return self._call("status", ticket)

    def status_after_first_step(self, ticket: int, timeout: float):
        return self._call("status_after_first_step", ticket, timeout)

    def stop(self, ticket: int) -> None:
        self._call("stop", ticket)

    def pause(self, ticket: int) -> None:
        self._call("pause", ticket)

    def resume(self, ticket: int) -> None:
        self._call("resume", ticket)

    def advance(self, ticket: int, steps: int = 1) -> None:
        self._call("advance", ticket, steps)

    def set_pace(self, ticket: int, steps_per_second: float) -> None:
        self._call("set_pace", ticket, steps_per_second)

    def release(self, ticket: int) -> None:
        self._call("release", ticket)

    def owned(self, owner: str) -> int | None:
        return self._call("owned", owner)

    def counts(self) -> dict[str, int]:
        return self._call("counts")

    def training_speed(self, config):
        """The speed measured on the cluster's Trainers for `config`'s kind (TrainingPool.training_speed, in the
        pool host), None until the first Trainer has timed it."""
        return self._call("training_speed", config)

    def training_pids(self) -> list[int]:
        """The process ids of the cluster's Trainer actors (on their own nodes)."""
        return self._call("training_pids")

    def close(self, timeout: float = 5.0) -> None:
        """This replica lets go of the cluster; the pool and its trainings stay for the others."""

    def shut_down(self) -> None:
        """End the cluster's pool and every training in it (an operator's or a test's act, not a replica's)."""
        ray = _ray()
        with contextlib.suppress(Exception):
            self._call("close")
        with contextlib.suppress(Exception):
            ray.kill(self._host, no_restart=True)


def _unreachable(address: str, error: BaseException) -> str:
    return (f"the training cluster (Ray at {address}, {ADDRESS_ENV}) cannot be reached: {_reason(error)}. Trainings "
            "are off until it answers; pages and stored runs still work. A cluster started with `ray start --head` "
            "(Ray 2.60) uses token authentication: set RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN). To train "
            f"on this machine instead, the operator unsets {ADDRESS_ENV}")

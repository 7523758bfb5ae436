"""One training pool for the whole server process, and a watcher that releases the tickets of
browser sessions that have ended (so a closed tab cancels its training unless someone else waits
for the same run).

`LENGEN_MAX_TRAININGS` limits concurrent trainings (default: the CPUs this process may use, its
affinity capped by a container's CPU quota: `lengen.runtime.usable_cpus`). Each runs in a
child process of its own (the server's interpreter stays free to serve pages), and torch's intra-op
threads are divided between them, so N trainings do not each start one thread per core. They
train on the app's one device, the one its analyses use (`ui.runs.analysis_device`: `$LENGEN_DEVICE`,
auto by default: CUDA, then MPS, then the CPU), resolved when the pool is made.

With `LENGEN_RAY_ADDRESS` set, the pool is the Ray cluster's one queue instead
(`lengen.ray_pool`), shared by every replica: `LENGEN_MAX_TRAININGS` then limits the
cluster's concurrent trainings (default: its CPUs, or its GPUs' shares), and a cluster that cannot be
reached is said on the pages that train (`usable_pool`), never replaced by local trainings.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
import time

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lengen.jobs import TrainingPool
from lengen.ray_pool import ADDRESS_ENV, ClusterUnreachable, RayTrainingPool
from lengen.runtime import deterministic_cublas, device_name, usable_cpus
from lengen.store import RunStore
from lengen_core.training import resolve_device
from ui.runs import analysis_device

LIMIT_ENV = "LENGEN_MAX_TRAININGS"
WARM_DELAY_SECONDS = 4.0
GRACE_SECONDS = 15.0  # a dropped websocket reconnects under the same session id within this


def max_trainings() -> int:
    cores = usable_cpus()
    try:
        limit = int(os.environ.get(LIMIT_ENV, cores))
    except ValueError:
        return cores
    return limit if limit >= 1 else cores


BROWSER_COOKIE = "_streamlit_xsrf"  # Streamlit's XSRF cookie: set once per browser, sent by all its tabs


def browser_id() -> str | None:
    """Who is asking, for the pool's one-training-per-browser rule: a hash of the token in Streamlit's XSRF
    cookie, which every tab of one browser shares (None without it, e.g. XSRF protection off: no rule then)."""
    with contextlib.suppress(Exception):  # no context outside a browser session
        cookie = st.context.cookies.get(BROWSER_COOKIE)
        if cookie:
            return hashlib.sha256(cookie_token(cookie)).hexdigest()[:16]
    return None


def cookie_token(cookie: str) -> bytes:
    """The token an XSRF cookie carries. Streamlit re-sends the cookie on every page load with the same
    token masked anew ("2|mask|masked token|time", the mask XORed over it), so the cookie's text differs
    between two tabs, or a reload, of one browser while its token does not. Any other form: its text."""
    value = cookie.strip("\"'")
    with contextlib.suppress(ValueError):
        version, mask, masked, _ = value.split("|")
        if version == "2":
            mask_bytes, masked_bytes = bytes.fromhex(mask), bytes.fromhex(masked)
            return bytes(byte ^ mask_bytes[i % len(mask_bytes)] for i, byte in enumerate(masked_bytes))
    return value.encode()


@st.cache_resource(show_spinner=False)
def training_pool() -> TrainingPool | RayTrainingPool:
    """This server's pool; ClusterUnreachable (not cached: the next page tries again) when
    LENGEN_RAY_ADDRESS names a cluster that does not answer."""
    if address := os.environ.get(ADDRESS_ENV, "").strip():
        answers(address)
        limit = os.environ.get(LIMIT_ENV, "").strip()
        return RayTrainingPool(address, RunStore(), max_concurrent=max_trainings() if limit else None)
    # The first training process starts 4 s after the pool (the first page is drawn by then), or at the
    # first request: its torch import and warm-up step would otherwise share the 2 cores with the first
    # visitor's first page (app bench: Start drawn in 10.4 s with it, 7.1-8.6 s without).
    deterministic_cublas()  # the training processes inherit it: a CUDA training is the same bytes each time
    # The app's one device, resolved here: app.py makes the pool at start, so a LENGEN_DEVICE this
    # machine lacks stops the server with the reason instead of failing every training and analysis.
    return TrainingPool(RunStore(), max_concurrent=max_trainings(), device=analysis_device(), isolate=True,
                        warm_delay=WARM_DELAY_SECONDS)


PROBE_SECONDS = 3.0


def answers(address: str) -> None:
    """ClusterUnreachable unless `address` (host:port, or ray://host:port) takes a connection within
    PROBE_SECONDS: Ray's own connect retries an absent head for many minutes, and a page must not wait that."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not port.isdigit():
        return  # `auto` (a node of the cluster finds its head itself), or a form Ray reads and judges
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as error:
        raise ClusterUnreachable(f"the training cluster (Ray at {address}, {ADDRESS_ENV}) cannot be reached: "
                                 f"{error.strerror or error}. Trainings are off until it answers; pages and stored runs "
                                 f"still work. To train on this machine instead, the operator unsets {ADDRESS_ENV}") from None


def training_device_name() -> str:
    """The device this server trains on, in words: 'cpu', 'cuda (NVIDIA H200)', 'Apple silicon (MPS)', or
    the cluster's: 'cpu on the Ray cluster at …'."""
    pool = training_pool()
    if isinstance(pool, RayTrainingPool):
        return f"{pool.device} on the Ray cluster at {pool.address}"
    return device_name(resolve_device(pool.device))


def usable_pool() -> TrainingPool | RayTrainingPool | None:
    """The pool, or (its cluster unreachable) None and the reason in the page."""
    try:
        return training_pool()
    except ClusterUnreachable as error:
        st.error(f"Training is unavailable: {error}.", icon=":material/cloud_off:")
        return None


def rejoin(pool: TrainingPool | RayTrainingPool, key: str) -> None:
    """A session without a training, on a cluster's shared pool: take up the training this browser started,
    if one is queued or running (a reload, or a replica that died and its browser moved to another)."""
    if key in st.session_state or not getattr(pool, "shared", False) or (owner := browser_id()) is None:
        return
    if (ticket := pool.owned(owner)) is not None:
        st.session_state[key] = ticket
        hold(ticket)


class SessionWatcher:
    """Releases a ticket once the browser session holding it has been gone for `grace` seconds."""

    def __init__(self, period: float = 2.0, grace: float = GRACE_SECONDS) -> None:
        self.period, self.grace = period, grace
        self._lock = threading.Lock()
        self._sessions: dict[tuple[TrainingPool, int], str] = {}  # (pool, ticket) -> session id
        self._gone_since: dict[tuple[TrainingPool, int], float] = {}
        threading.Thread(target=self._watch, name="lengen-session-watcher", daemon=True).start()

    def watch(self, pool: TrainingPool, ticket: int, session_id: str) -> None:
        with self._lock:
            self._sessions[pool, ticket] = session_id

    def forget(self, pool: TrainingPool, ticket: int) -> None:
        with self._lock:
            self._sessions.pop((pool, ticket), None)
            self._gone_since.pop((pool, ticket), None)

    def sweep(self, is_active, now: float) -> list[int]:
        """Release the tickets of sessions inactive for longer than the grace; returns them."""
        with self._lock:
            held = dict(self._sessions)
        released = []
        for (pool, ticket), session_id in held.items():
            if is_active(session_id):
                self._gone_since.pop((pool, ticket), None)
            elif now - self._gone_since.setdefault((pool, ticket), now) >= self.grace:
                pool.release(ticket)
                self.forget(pool, ticket)
                released.append(ticket)
        return released

    def _watch(self) -> None:
        while True:
            time.sleep(self.period)
            if runtime.exists():  # not under AppTest or a bare `python`: nothing to watch there
                with contextlib.suppress(Exception):  # the watcher must outlive any one bad check
                    self.sweep(runtime.get_instance().is_active_session, time.monotonic())


@st.cache_resource(show_spinner=False)
def session_watcher() -> SessionWatcher:
    return SessionWatcher()


def hold(ticket: int) -> None:
    """Tie `ticket` to this browser session: it is released when the session ends."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is not None:
        session_watcher().watch(training_pool(), ticket, ctx.session_id)


def let_go(ticket: int) -> None:
    """This session is done with `ticket`."""
    pool = training_pool()
    session_watcher().forget(pool, ticket)
    pool.release(ticket)

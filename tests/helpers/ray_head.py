"""A Ray head on this machine for the tests, with token authentication as Ray 2.60's `ray start --head`
has it: `ray_head()` yields (address, the environment a client connects with: RAY_AUTH_MODE=token and
the cluster's token); `ray_worker(address, env)` joins a second node to it (the topology test). The
processes of each run in a session of their own, and only that session's processes are ended afterwards
(`ray stop` would end every Ray process of the machine, another test's too)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def session_processes(session: int) -> list[int]:
    """The ids of the live processes in session `session` (field 6 of /proc/<pid>/stat)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == session and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


def end_session(session: int, grace: float = 5.0) -> None:
    """SIGTERM every process of the session, then SIGKILL what is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
        for pid in session_processes(session):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while session_processes(session) and time.monotonic() < deadline:
            time.sleep(0.2)


@contextlib.contextmanager
def ray_head(home: Path, cpus: int = 2) -> Iterator[tuple[str, dict[str, str]]]:
    temp = Path("/tmp") / f"ray-{os.getpid()}-{free_port()}"  # Ray's socket paths must stay short
    env = {**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=120)
    token = (home / ".ray" / "auth_token").read_text().strip()
    port = free_port()
    head = {**env, "RAY_AUTH_MODE": "token"}
    starter = subprocess.Popen([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                                f"--num-cpus={cpus}", "--num-gpus=0", "--include-dashboard=false",
                                # ports Ray fixes by default: free ones, so that two heads (two xdist workers,
                                # or another checkout's tests) can run on one machine at once
                                f"--dashboard-agent-listen-port={free_port()}",
                                f"--metrics-export-port={free_port()}",
                                "--disable-usage-stats", f"--temp-dir={temp}"],
                               env=head, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # its daemons stay in this session: ended below, alone
    try:
        _, err = starter.communicate(timeout=300)
        assert starter.returncode == 0, err[-2000:]
        yield f"127.0.0.1:{port}", {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    finally:
        end_session(starter.pid)
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def ray_worker(address: str, env: dict[str, str], cpus: int = 2) -> Iterator[int]:
    """A second Ray node joined to the head at `address` (`ray start --address`, the client's token
    environment `env`), with `cpus` CPUs and no GPU; yields its starter's session, whose processes
    (the node's raylet and the workers it started) alone are ended afterwards."""
    starter = subprocess.Popen([RAY, "start", f"--address={address}", "--node-ip-address=127.0.0.1",
                                f"--num-cpus={cpus}", "--num-gpus=0",
                                f"--dashboard-agent-listen-port={free_port()}", f"--metrics-export-port={free_port()}",
                                "--disable-usage-stats"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        _, err = starter.communicate(timeout=300)
        assert starter.returncode == 0, err[-2000:]
        yield starter.pid
    finally:
        end_session(starter.pid)

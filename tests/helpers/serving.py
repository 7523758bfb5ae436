"""The app served for the browser tests: from the checkout (`serve_checkout`, `streamlit run serve.py`)
or as the container serves it (`serve_image`), healthy before it is handed over.

No Docker engine runs here, so `serve_image` reads the Dockerfile and reproduces what it does with
what it names: the files it COPYs into a fresh app folder (nothing else of the repository), its
ENV, its USER's uid (a non-root uid, through setpriv) with a fresh data volume owned by it, the same
requirements (the test venv is installed from that requirements.txt), and its CMD, run as written.
The container test and the load test serve from it; the other browser tests from the checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.app_bench import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
UID = 10001


def dockerfile() -> dict:
    """COPY sources, ENV, the USER's uid, CMD and HEALTHCHECK (its command and timeout) of the Dockerfile."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    spec = {"copy": [], "env": {}, "cmd": None, "health": None, "health_timeout_s": None, "user": None}
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "COPY":
            *sources, _target = shlex.split(rest)
            spec["copy"] += [s for s in sources if not s.startswith("--")]
        elif word == "ENV":
            spec["env"].update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
        elif word == "CMD":
            spec["cmd"] = json.loads(rest)
        elif word == "HEALTHCHECK":
            options, spec["health"] = rest.split(" CMD ", 1)
            timeout = re.search(r"--timeout=(\d+)s", options)
            spec["health_timeout_s"] = float(timeout.group(1)) if timeout else 30.0  # Docker's default
        elif word == "USER":
            spec["user"] = rest
    useradd = re.search(r"useradd .*--uid (\d+) (\w+)", text)
    spec["uid"] = int(useradd.group(1)) if useradd and useradd.group(2) == spec["user"] else None
    return spec


def can_serve() -> str | None:
    """None when this machine can serve the image's environment, else why not."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return "switching to the image's uid needs root and setpriv"
    return None


@contextlib.contextmanager
def traversable_interpreter() -> Iterator[None]:
    """In the image the interpreter is world-readable; here it may sit under a root-only home (pyenv
    in /root). Grant others the traverse bit on its folders meanwhile and restore them after."""
    changed = []
    for target in (Path(os.path.realpath(sys.executable)), Path(sys.prefix).resolve()):
        for folder in target.parents:
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod(mode | 0o001)
                changed.append((folder, mode))
    try:
        yield
    finally:
        for folder, mode in reversed(changed):
            folder.chmod(mode)


@contextlib.contextmanager
def serve_checkout(env: dict[str, str] | None = None, own_session: bool = False) -> Iterator[dict]:
    """`streamlit run serve.py` (the app and its download route) from the checkout on a free port,
    healthy; yields its url and process.
    The server inherits this process's environment (e.g. a temporary `LENGEN_HOME`), plus `env`.
    `own_session`: in a process session of its own, so that Linux's autogroup scheduler gives it a share of
    the CPU of its own, as a replica on its own machine or container has (otherwise every server this process
    starts, and this process, share one)."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
               "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=own_session)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout=90)
        yield {"url": url, "process": process}
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def serve_image() -> Iterator[dict]:
    """The app served as the image serves it, healthy; yields its url, process, data volume, spec,
    port and app folder."""
    spec = dockerfile()
    image = Path(tempfile.mkdtemp(prefix="lengen-image-"))  # pytest's own temp root is private to root
    image.chmod(0o755)
    app, data = image / "app", image / "data"
    app.mkdir(mode=0o755)
    for source in spec["copy"]:
        path = ROOT / source
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, app / source.rstrip("/"))
    data.mkdir()
    os.chown(data, UID, UID)
    port = free_port()
    environment = {**os.environ, **spec["env"], "LENGEN_HOME": str(data), "HOME": str(data),
                   "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    environment.pop("PYTHONPATH", None)
    command = [*spec["cmd"], "--server.port", str(port), "--server.address", "127.0.0.1"]
    command = [a for a in command if a not in ("--server.address=0.0.0.0", "--server.port=8501")]
    log = (image / "server.log").open("w")  # a file, not a pipe: nobody reads it while the server runs
    process = subprocess.Popen(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", *command],
                               cwd=app, env=environment, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, process, timeout=90)
        except RuntimeError as error:
            raise AssertionError(f"{error}: {(image / 'server.log').read_text()[-3000:]}") from None
        yield {"url": url, "process": process, "data": data, "spec": spec, "port": port, "app": app}
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(image, ignore_errors=True)

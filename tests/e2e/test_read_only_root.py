"""The container's `docker run --read-only --tmpfs /tmp` without a Docker engine: a private mount
namespace (`unshare -m`, root only) remounts the root filesystem read-only, mounts a tmpfs at /tmp
and leaves only the store writable, and the commands run there with the Dockerfile's own ENV (read
from it, so the test and the image cannot drift apart). HOME is read-only too, as the image user's is.

Training used to fail there with "Artifact of type=precompile already registered": torch found no
writable temp directory, and the training process's warm-up hid why. Here a training from the
command line and one from the app's Train page (its training pool, child processes and all) succeed,
the health check the Dockerfile declares passes, and the run downloads; without the tmpfs no
temporary file can be made anywhere, which shows the root really is read-only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.app_bench import free_port, wait_healthy
from tests.helpers.serving import ROOT, dockerfile

pytestmark = pytest.mark.e2e
# In the new namespace: the store stays writable (a bind mount of its own), / becomes read-only for
# this namespace only, and /tmp a fresh tmpfs, sized as the README's `docker run` line sizes it.
MOUNTS = ('mount --bind "$STORE" "$STORE" && {keep}mount -o remount,bind,ro / && '
          '{tmpfs}exec "$@"')
TMPFS = "mount -t tmpfs -o size=1g,mode=1777 none /tmp && "
# A checkout under /tmp (CI may clone there) would vanish under the tmpfs with its virtual environment:
# it is bound aside first ($KEEP), then put back, read-only, at its own path inside the tmpfs.
KEEP = 'mount --bind "$CHECKOUT" "$KEEP" && '
RESTORE = 'mkdir -p "$CHECKOUT" && mount --bind "$KEEP" "$CHECKOUT" && mount -o remount,bind,ro "$CHECKOUT" && '
UNDER_TMP = ROOT.resolve().is_relative_to("/tmp")


def why_not() -> str | None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return "a private mount namespace needs root and unshare"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -o remount,bind,ro /"],
                           capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        return f"this machine does not allow a private read-only remount: {probe.stderr.strip()}"
    return None


def read_only(command: list[str], tmpfs: bool = True) -> list[str]:
    """`command` under a read-only root, the store ($STORE) writable, and a tmpfs at /tmp if `tmpfs`."""
    keep, restore = (KEEP, RESTORE) if UNDER_TMP else ("", "")
    mounts = MOUNTS.format(keep=keep, tmpfs=TMPFS + restore if tmpfs else "")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", mounts, "sh", *command]


@pytest.fixture(scope="module")
def sealed() -> Iterator[dict]:
    """The image's environment: its ENV, the store at $LENGEN_HOME (outside /tmp, which the tmpfs
    hides), a HOME that exists but cannot be written."""
    if (why := why_not()) is not None:
        pytest.skip(why)
    spec = dockerfile()
    scratch = Path(tempfile.mkdtemp(prefix="lengen-ro-", dir="/var/tmp"))
    store, home, keep = scratch / "data", scratch / "home", scratch / "checkout"
    for folder in (store, home, keep):
        folder.mkdir()
    env = {**os.environ, **spec["env"], "LENGEN_HOME": str(store), "STORE": str(store), "HOME": str(home),
           "OMP_NUM_THREADS": "1", "KEEP": str(keep), "CHECKOUT": str(ROOT.resolve())}
    env.pop("PYTHONPATH", None)
    try:
        yield {"env": env, "store": store, "spec": spec}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def train(sealed: dict, tmpfs: bool) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lengen", "train", "--steps", "5", "--seed", "7", "--json"]
    return subprocess.run(read_only(command, tmpfs), cwd=ROOT, env=sealed["env"], capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_environment_really_is_read_only(sealed):
    assert sealed["spec"]["env"]["TMPDIR"] == "/tmp"  # the image points torch at the tmpfs
    probe = "touch /lengen-probe; touch \"$HOME/probe\"; touch \"$STORE/probe\" && echo store-writable"
    result = subprocess.run(read_only(["sh", "-c", probe]), env=sealed["env"], capture_output=True, text=True,
                            timeout=30, check=False)
    assert result.stderr.count("Read-only file system") == 2, result.stderr
    assert "store-writable" in result.stdout
    (sealed["store"] / "probe").unlink()
    # A temporary file is possible with the tmpfs and nowhere without it (training itself may not need one)
    make_temp = [sys.executable, "-c", "import tempfile; print(tempfile.mkstemp()[1])"]
    without = subprocess.run(read_only(make_temp, tmpfs=False), cwd=ROOT, env=sealed["env"], capture_output=True,
                             text=True, timeout=60, check=False)
    assert without.returncode != 0 and "No usable temporary directory" in without.stderr, without.stderr
    with_tmpfs = subprocess.run(read_only(make_temp), cwd=ROOT, env=sealed["env"], capture_output=True, text=True,
                                timeout=60, check=False)
    assert with_tmpfs.returncode == 0 and with_tmpfs.stdout.startswith("/tmp/"), with_tmpfs.stderr


def test_a_training_from_the_command_line_succeeds(sealed):
    result = train(sealed, tmpfs=True)
    assert result.returncode == 0, result.stderr
    assert "precompile" not in result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    assert (sealed["store"] / "runs" / run_id / "weights.safetensors").is_file()


@contextlib.contextmanager
def served(sealed: dict) -> Iterator[dict]:
    """The image's CMD, as written, on a free port of the loopback, under the read-only root."""
    port = free_port()
    command = [a for a in sealed["spec"]["cmd"] if a not in ("--server.address=0.0.0.0", "--server.port=8501")]
    command = [sys.executable, "-m", *command, "--server.port", str(port), "--server.address", "127.0.0.1"]
    log = tempfile.TemporaryFile()  # noqa: SIM115 — read after the server stops
    process = subprocess.Popen(read_only(command), cwd=ROOT, env=sealed["env"], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout=120)
        yield {"url": url, "port": port, "log": log}
    finally:
        os.killpg(process.pid, 15)  # unshare, sh and the server: a session of their own
        process.wait(timeout=30)
        log.close()


def server_log(log) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-4000:]


def test_the_app_serves_trains_and_downloads_under_a_read_only_root(sealed, browser):
    """The browser is the session's chromium (conftest.py): a second Playwright cannot start beside it."""
    playwright = pytest.importorskip("playwright.sync_api")
    with served(sealed) as app:
        health = sealed["spec"]["health"].replace("8501", str(app["port"]))
        assert subprocess.run(shlex.split(health), timeout=30, check=False).returncode == 0
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(app["url"] + "/train")
        steps = page.get_by_role("spinbutton", name="Steps", exact=True)
        steps.wait_for(timeout=120_000)
        steps.fill("30")
        steps.press("Tab")
        page.wait_for_timeout(1500)
        page.get_by_role("button", name="Train", exact=True).click()
        try:
            page.get_by_text("saved and selected").wait_for(timeout=240_000)
        except playwright.TimeoutError:
            main = page.locator('[data-testid="stMain"]').inner_text()
            raise AssertionError(f"no training saved; page: {main[-1500:]}\nserver: {server_log(app['log'])}") from None
        assert not page.locator('[data-testid="stException"]').count()
        page.close()
        runs = sorted((sealed["store"] / "runs").iterdir(), key=lambda d: d.stat().st_mtime)
        run_id = runs[-1].name  # the newest: the app's
        assert json.loads((runs[-1] / "metrics.json").read_text())["steps"] == 30
        with urllib.request.urlopen(f"{app['url']}/download/{run_id}.zip", timeout=60) as response:
            archive = zipfile.ZipFile(io.BytesIO(response.read()))
        assert archive.testzip() is None and "weights.safetensors" in archive.namelist()
        log = server_log(app["log"])
    assert not re.search(r"precompile|Traceback", log), log

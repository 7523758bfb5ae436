"""The container without a Docker engine: the image's environment built the way the Dockerfile does.

No engine runs here, so this reads the Dockerfile and reproduces what it does with what it names:
the files it COPYs into a fresh app folder (nothing else of the repository), its ENV, its USER's
uid (a non-root uid, through setpriv) with a fresh data volume owned by it, the same requirements
(the test venv is installed from that requirements.txt), and its CMD, run as written. Then: the
health check the Dockerfile declares passes, the page loads in chromium with the shipped presets
(offline, no store of its own yet), and runs are written to the volume.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
UID = 10001
CHROMIUM = "/usr/bin/chromium"


def dockerfile() -> dict:
    """COPY sources, ENV, the USER's uid, CMD and HEALTHCHECK command of the Dockerfile."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    spec = {"copy": [], "env": {}, "cmd": None, "health": None, "user": None}
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
            spec["health"] = rest.split(" CMD ", 1)[1]
        elif word == "USER":
            spec["user"] = rest
    useradd = re.search(r"useradd .*--uid (\d+) (\w+)", text)
    spec["uid"] = int(useradd.group(1)) if useradd and useradd.group(2) == spec["user"] else None
    return spec


def test_dockerfile_runs_as_a_non_root_user_and_declares_a_health_check():
    spec = dockerfile()
    assert spec["user"] == "lengen" and spec["uid"] == UID
    assert "/_stcore/health" in spec["health"] and spec["cmd"][:3] == ["streamlit", "run", "app.py"]
    assert spec["env"]["LENGEN_HOME"] == "/data"
    assert {"app.py", "lengen_core/", "ui/", "pages/", "assets/", ".streamlit/", "requirements.txt"} <= set(spec["copy"])


@pytest.fixture(scope="module")
def traversable_interpreter():
    """In the image the interpreter is world-readable; here it may sit under a root-only home (pyenv
    in /root). Grant others the traverse bit on its folders for the test and restore them after."""
    changed = []
    for target in (Path(os.path.realpath(sys.executable)), Path(sys.prefix).resolve()):
        for folder in target.parents:
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod(mode | 0o001)
                changed.append((folder, mode))
    yield
    for folder, mode in reversed(changed):
        folder.chmod(mode)


@pytest.fixture(scope="module")
def container(traversable_interpreter):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("switching to the image's uid needs root and setpriv")
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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **spec["env"], "LENGEN_HOME": str(data), "HOME": str(data),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    command = [*spec["cmd"], "--server.port", str(port), "--server.address", "127.0.0.1"]
    command = [a for a in command if a not in ("--server.address=0.0.0.0", "--server.port=8501")]
    process = subprocess.Popen(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", *command],
                               cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                assert process.poll() is None, process.stderr.read()
                assert time.monotonic() < deadline, "not healthy within 90 s"
                time.sleep(0.5)
        yield {"url": url, "process": process, "data": data, "spec": spec, "port": port, "app": app}
    finally:
        process.terminate()
        process.wait(timeout=20)
        shutil.rmtree(image, ignore_errors=True)


def test_the_served_app_runs_as_the_image_user_and_passes_its_health_check(container):
    status = Path(f"/proc/{container['process'].pid}/status").read_text()
    assert re.search(rf"^Uid:\s+{UID}\s", status, re.MULTILINE)
    health = container["spec"]["health"].replace("8501", str(container["port"]))
    assert subprocess.run(shlex.split(health), timeout=30, check=False).returncode == 0


def test_the_page_loads_with_the_shipped_presets_offline(container):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(container["url"] + "/dilution")
        page.wait_for_selector(".js-plotly-plot", timeout=180_000)
        assert page.locator("text=Traceback").count() == 0
        assert page.locator(".js-plotly-plot").count() >= 1
        browser.close()


def test_runs_are_written_to_the_volume_by_the_image_user(container):
    env = {**os.environ, **container["spec"]["env"], "LENGEN_HOME": str(container["data"]), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    command = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
               sys.executable, "-m", "lengen_core", "train", "--steps", "5", "--json"]
    result = subprocess.run(command, cwd=container["app"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    written = container["data"] / "runs" / run_id / "weights.safetensors"
    assert written.exists() and written.stat().st_uid == UID

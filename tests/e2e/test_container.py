"""The container without a Docker engine (`serving` builds the image's environment the way the
Dockerfile does): the health check the Dockerfile declares passes, the served app runs as the image's
non-root user, the page loads in chromium with the shipped presets (offline, no store of its own
yet), and runs are written to the volume."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lengen.runtime import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES
from tests.helpers.serving import ROOT, UID, can_serve, dockerfile, serve_image, traversable_interpreter

pytestmark = pytest.mark.e2e


def test_dockerfile_runs_as_a_non_root_user_and_declares_a_health_check():
    spec = dockerfile()
    assert spec["user"] == "lengen" and spec["uid"] == UID
    assert "/_stcore/health" in spec["health"] and spec["cmd"][:3] == ["streamlit", "run", "serve.py"]
    assert spec["env"]["LENGEN_HOME"] == "/data"
    assert spec["env"]["TMPDIR"] == "/tmp"  # a read-only root with a tmpfs at /tmp: torch needs a writable temp
    # the heap's thresholds as lengen.runtime sets them in its processes
    assert spec["env"]["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD_BYTES)
    assert spec["env"]["MALLOC_TRIM_THRESHOLD_"] == str(TRIM_THRESHOLD_BYTES)
    # the GPU image (TORCH_VARIANT=cu128) sees the GPUs through the NVIDIA runtime; harmless without one
    assert spec["env"]["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert spec["env"]["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert spec["env"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"  # deterministic cuBLAS: a CUDA run is the same bytes
    assert '"/usr/bin/tini"' in (ROOT / "Dockerfile").read_text()  # an init reaps the training processes
    assert {"app.py", "serve.py", "lengen_core/", "ui/", "pages/", "assets/", ".streamlit/", "requirements.txt"} <= set(spec["copy"])


@pytest.fixture(scope="module")
def container():
    if (why := can_serve()) is not None:
        pytest.skip(why)
    with traversable_interpreter(), serve_image() as served:
        yield served


def test_the_served_app_runs_as_the_image_user_and_passes_its_health_check(container):
    status = Path(f"/proc/{container['process'].pid}/status").read_text()
    assert re.search(rf"^Uid:\s+{UID}\s", status, re.MULTILINE)
    health = container["spec"]["health"].replace("8501", str(container["port"]))
    assert subprocess.run(shlex.split(health), timeout=30, check=False).returncode == 0


def test_the_page_loads_with_the_shipped_presets_offline(container, browser):
    """In the session's chromium (conftest.py): a second Playwright cannot start beside it in one process."""
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    page.goto(container["url"] + "/dilution")
    page.wait_for_selector(".js-plotly-plot", timeout=180_000)
    assert page.locator("text=Traceback").count() == 0
    assert page.locator(".js-plotly-plot").count() >= 1
    page.close()


def test_runs_are_written_to_the_volume_by_the_image_user(container):
    env = {**os.environ, **container["spec"]["env"], "LENGEN_HOME": str(container["data"]), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    command = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
               sys.executable, "-m", "lengen", "train", "--steps", "5", "--json"]
    result = subprocess.run(command, cwd=container["app"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    written = container["data"] / "runs" / run_id / "weights.safetensors"
    assert written.exists() and written.stat().st_uid == UID


def test_the_shipped_config_is_hardened_and_light_on_the_server():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server, runner = config["server"], config["runner"]
    assert server["headless"] and server["fileWatcherType"] == "none" and not server["runOnSave"]
    assert server["enableXsrfProtection"] and server["enableCORS"] and server["maxUploadSize"] <= 1
    assert server["allowedHosts"] == ["localhost", "127.0.0.1"]  # not empty: empty accepts any Host header
    assert config["browser"]["gatherUsageStats"] is False
    assert config["client"]["showErrorDetails"] == "none"
    assert runner["postScriptGC"] is False  # a full collection after every run stalled the event loop

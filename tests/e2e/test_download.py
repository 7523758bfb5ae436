"""A run's zip streamed from disk (`ui.downloads`, served by `streamlit run serve.py`): the server's
peak memory grows by far less than the zip while the largest run the config allows is downloaded,
the sidebar's button yields the selected run's zip in chromium, and the route answers stored runs
only."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from lengen.store import RunStore, preset_store
from lengen_core.config import MAX_D_MODEL, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, RunConfig, with_changes
from lengen_core.models.initial import initial_model
from lengen_core.training import Run
from tests.helpers.serving import serve_checkout

pytestmark = pytest.mark.e2e
CHUNK = 1 << 20


def largest_run(home: Path) -> str:
    """The largest run the config allows (a learned table of every position, 8 layers of d_model 512),
    stored untrained: the download does not care what the weights learned."""
    config = with_changes(RunConfig(), encoding="learned", max_positions=MAX_POSITIONS, d_model=MAX_D_MODEL,
                          n_layers=MAX_LAYERS, n_heads=MAX_HEADS, steps=1)
    run = Run(config=config, model=initial_model(config), device="cpu", steps=0, train_seconds=0.0, loss=0.0,
              train_accuracy=0.0, stopped_early=False)
    RunStore(home).save(run)
    return run.run_id


def kilobytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def fetch(url: str, into) -> int:
    """GET `url` a megabyte at a time into the file `into`; returns the bytes received."""
    received = 0
    with urllib.request.urlopen(url, timeout=120) as response:
        assert response.headers["Content-Type"] == "application/zip"
        assert response.headers["Content-Disposition"].startswith("attachment;")
        while chunk := response.read(CHUNK):
            into.write(chunk)
            received += len(chunk)
    return received


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A server whose store holds the largest run; yields its url, process, store and the run's id."""
    home = tmp_path_factory.mktemp("big-store")
    run_id = largest_run(home)
    with serve_checkout({"LENGEN_HOME": str(home)}) as served:
        yield {**served, "home": home, "run_id": run_id}


@pytest.mark.slow
@pytest.mark.serial  # measures the server's peak memory
def test_the_largest_run_streams_while_the_server_grows_by_far_less_than_its_zip(big, tmp_path):
    pid, url = big["process"].pid, big["url"]
    preset = next(iter(preset_store().size()))
    with io.BytesIO() as warm:  # the route's imports (torch among them) are loaded before measuring
        fetch(f"{url}/download/{preset}.zip", warm)
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from the current size
    before = kilobytes(pid, "VmHWM")
    target = tmp_path / "run.zip"
    with target.open("wb") as file:
        size = fetch(f"{url}/download/{big['run_id']}.zip", file)
    growth = (kilobytes(pid, "VmHWM") - before) << 10
    print(f"zip {size / 2**20:.0f} MB, server peak RSS {before >> 10} MB before, grew {growth / 2**20:.1f} MB")
    assert size > 200 << 20
    assert growth < size / 10, f"the server's peak grew {growth / 2**20:.0f} MB for a {size / 2**20:.0f} MB zip"
    stored = RunStore(big["home"]).run_dir(big["run_id"]) / "weights.safetensors"
    with zipfile.ZipFile(target) as archive:
        assert sorted(archive.namelist()) == ["config.json", "metrics.json", "weights.safetensors"]
        with archive.open("weights.safetensors") as weights:  # read through the zip: its CRC is checked at the end
            digest = hashlib.file_digest(weights, "sha256").hexdigest()
    assert digest == hashlib.sha256(stored.read_bytes()).hexdigest()


def test_only_stored_runs_by_a_valid_id_can_be_fetched(big):
    url = big["url"]
    preset = next(iter(preset_store().size()))
    assert status_of(f"{url}/download/{preset}.zip") == 200  # the presets, read-only, are served as well
    for path in ("/download/no-such-run.zip", "/download/%2e%2e.zip", "/download/.tmp-1-x.zip",
                 "/download/Upper.zip", "/download/..%2F..%2Fetc%2Fpasswd.zip", "/download/x%00.zip"):
        assert status_of(url + path) in (400, 404), path


def test_the_sidebar_download_yields_the_selected_runs_zip(server, browser, tmp_path):
    context = browser.new_context(viewport={"width": 1400, "height": 1200}, accept_downloads=True)
    downloads = []
    # The link opens in a new tab (st.link_button), whose response is an attachment: the download is that tab's.
    context.on("page", lambda tab: tab.on("download", lambda download: downloads.append(download)))
    tab = context.new_page()
    tab.goto(server)
    button = tab.get_by_role("link", name="Download this run (zip)")
    button.wait_for(timeout=90_000)
    run_id = tab.locator('[data-testid="stSidebar"]').get_by_text("Run id:").inner_text().split(":", 1)[1].strip()
    assert button.get_attribute("href") == f"/download/{run_id}.zip"
    button.click()
    for _ in range(600):  # the Python side hears of the new tab's download while Playwright waits
        if downloads:
            break
        tab.wait_for_timeout(100)
    assert downloads, "no download started"
    target = tmp_path / downloads[0].suggested_filename
    downloads[0].save_as(target)
    assert target.name == f"{run_id}.zip"
    with zipfile.ZipFile(target) as archive:
        assert archive.testzip() is None
        assert RunConfig.from_dict(json.loads(archive.read("config.json"))).run_id() == run_id
    context.close()

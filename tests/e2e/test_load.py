"""Load: a class presses Train at once. The app is served as the container serves it (`serving`:
the image's files, config, user and command; `streamlit run` from the checkout where that cannot be
built), and N browser sessions (Playwright contexts in one chromium, kept back in a low-weight
cgroup as they stand in for the students' own machines) open it on loopback within a few seconds of
each other, and each starts its own training. A health probe and a newcomer opening the Train page
every few seconds run as processes of their own (`tests/helpers/load_probe.py`).

Recorded in artifacts/load_test.json: how many finished, the median and worst wait from click to
the finished message, page-load times, the health endpoint's latency throughout, the server's peak
memory and CPU. Asserted: every session gets its run and it is stored, none shows an exception, every
health check is answered within the image's HEALTHCHECK timeout, and the newcomer is always served.
Opt-in, as it takes minutes of both cores: `LENGEN_LOAD_SESSIONS=20 .venv/bin/python -m pytest tests/e2e/test_load.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from lengen.share import config_to_query
from lengen.store import RunStore
from lengen_core.config import RunConfig, with_changes
from tests.helpers import serving
from tests.helpers.browser import CHROMIUM
from tests.helpers.kept_back import BrowserGroup, children, peak_rss_mb
from tests.helpers.load_probe import BROWSER_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial]  # serial: a class on both cores, timed
playwright = pytest.importorskip("playwright.async_api")

ROOT = serving.ROOT
PROBE = "tests.helpers.load_probe"  # run as a module from the checkout: python -m tests.helpers.load_probe
SESSIONS = int(os.environ.get("LENGEN_LOAD_SESSIONS", "0"))  # opt-in: LENGEN_LOAD_SESSIONS=20
STEPS = 60


async def one_session(browser, url: str, index: int, start_at: float) -> dict:
    config = with_changes(RunConfig(), steps=STEPS, seed=1000 + index)
    link = f"{url}/train?{urllib.parse.urlencode(config_to_query(config))}"
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    context = await browser.new_context(viewport={"width": 1024, "height": 900})
    page = await context.new_page()
    opened = time.monotonic()
    await page.goto(link, wait_until="commit", timeout=180_000)  # 20 pages load at once on 2 cores
    button = page.get_by_role("button", name="Train", exact=True)
    await button.wait_for(timeout=180_000)
    loaded = time.monotonic()
    await button.click(timeout=180_000)  # a starved page (kept back for the server) takes a while
    clicked = time.monotonic()
    await page.get_by_text("Finished: saved and selected").wait_for(timeout=900_000)
    finished = time.monotonic()
    exceptions = await page.locator("[data-testid='stException']").count()
    await context.close()
    return {"session": index, "run_id": config.run_id(), "page_load_s": loaded - opened,
            "wait_s": finished - clicked, "exceptions": exceptions}


def observations(path: Path) -> list[float | None]:
    """The latencies a probe recorded, in order (None = failed)."""
    if not path.exists():
        return []
    return [json.loads(line)["latency_s"] for line in path.read_text().splitlines() if line.strip()]


def run_class_apart(url: str) -> tuple[list[dict], str]:
    """Run the browsers at the lowest priority: in a class they run on the students' machines, here
    they share the server's cores, and the server must not queue behind them. Returns the results and
    how the browsers were kept back (see `BrowserGroup`)."""
    results: list = []
    group = BrowserGroup()

    def browse() -> None:
        os.nice(19)  # per thread on Linux, inherited by the Playwright driver
        results.extend(asyncio.run(run_class(url, group)))

    thread = threading.Thread(target=browse, name="browsers")
    thread.start()
    thread.join()
    group.close()
    return results, group.kind


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its waited-for children (the training processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def child_cpu_seconds(pid: int) -> float:
    total = 0.0
    for child in children(pid):
        try:
            total += cpu_seconds(child)
        except OSError:
            pass
    return total


async def run_class(url: str, group: BrowserGroup) -> list[dict]:
    async with playwright.async_playwright() as p:
        group.enter_drivers()
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        start = time.monotonic() + 1.0
        # Everyone within ~5 s of each other, as a class does.
        results = await asyncio.gather(
            *(one_session(browser, url, i, start + 5.0 * i / SESSIONS) for i in range(SESSIONS)),
            return_exceptions=True)
        await browser.close()
        return results


@contextlib.contextmanager
def served(tmp_path: Path) -> Iterator[tuple[str, int, Path, str]]:
    """The app as the container serves it (`serving.serve_image`: its files, config, user and
    command), or, where that cannot be built, `streamlit run app.py` from the checkout:
    (url, server pid, run store, which)."""
    if serving.can_serve() is None:
        with serving.traversable_interpreter(), serving.serve_image() as image:
            yield image["url"], image["process"].pid, image["data"], "image"
    else:
        with serving.serve_checkout({"LENGEN_HOME": str(tmp_path)}) as checkout:
            yield checkout["url"], checkout["process"].pid, tmp_path, "checkout"


@pytest.mark.skipif(SESSIONS < 1, reason="opt-in (minutes of 2 cores): LENGEN_LOAD_SESSIONS=20 pytest tests/e2e/test_load.py")
def test_a_class_of_sessions_each_gets_its_run(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    observed = {name: tmp_path / f"{name}.jsonl" for name in ("health", "newcomer")}
    with served(tmp_path) as (url, pid, store, how):
        probes = [subprocess.Popen([sys.executable, "-m", PROBE, name, url, str(path)], cwd=ROOT)
                  for name, path in observed.items()]
        try:
            began = time.monotonic()
            results, isolation = run_class_apart(url)
            elapsed = time.monotonic() - began
            peak = peak_rss_mb(pid)
            server_cpu, training_cpu = cpu_seconds(pid), child_cpu_seconds(pid)
        finally:
            for process in probes:
                process.terminate()
                process.wait(timeout=30)
        stored = {s.run_id for s in RunStore(store).list_runs()}

    failures = [r for r in results if isinstance(r, BaseException)]
    finished = [r for r in results if isinstance(r, dict)]
    waits = sorted(r["wait_s"] for r in finished)
    health, loads = observations(observed["health"]), observations(observed["newcomer"])
    latencies = [x for x in health if x is not None]
    health_timeout = serving.dockerfile()["health_timeout_s"]
    report = {
        "sessions": SESSIONS, "served_as": how, "browsers_kept_back_by": isolation, "steps_per_run": STEPS,
        "cores": os.cpu_count(), "finished": len(finished), "stored": len(stored),
        "failures": [repr(f)[:300] for f in failures],
        "median_wait_s": statistics.median(waits) if waits else None, "worst_wait_s": max(waits, default=None),
        "median_page_load_s": statistics.median(r["page_load_s"] for r in finished) if finished else None,
        "worst_page_load_s": max((r["page_load_s"] for r in finished), default=None),
        "newcomer_page_loads": len(loads), "newcomer_failures": loads.count(None),
        "newcomer_median_page_load_s": statistics.median(x for x in loads if x is not None)
        if any(x is not None for x in loads) else None,
        "newcomer_worst_page_load_s": max((x for x in loads if x is not None), default=None),
        "health_checks": len(health), "health_failures": health.count(None),
        "health_timeout_s": health_timeout,
        "median_health_latency_s": statistics.median(latencies) if latencies else None,
        "p95_health_latency_s": statistics.quantiles(latencies, n=20)[-1] if len(latencies) > 1 else None,
        "worst_health_latency_s": max(latencies, default=None), "server_peak_rss_mb": peak,
        "server_cpu_s": server_cpu, "training_processes_cpu_s": training_cpu,
        "total_s": elapsed, "sessions_detail": finished,
    }
    out = ROOT / "artifacts"
    out.mkdir(exist_ok=True)
    (out / "load_test.json").write_text(json.dumps(report, indent=2))

    assert not failures, report["failures"]
    assert len(finished) == SESSIONS
    assert all(r["exceptions"] == 0 for r in finished)
    assert {r["run_id"] for r in finished} <= stored  # nothing lost
    # Responsive: every health check answered, and none slower than the image's HEALTHCHECK timeout
    # (Docker would count a slower one as failed); a new visitor's page loads every time.
    assert report["health_failures"] == 0 and report["worst_health_latency_s"] < health_timeout
    assert report["newcomer_page_loads"] >= 1 and report["newcomer_failures"] == 0

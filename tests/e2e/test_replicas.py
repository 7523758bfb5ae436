"""Two app replicas sharing one store (one temporary `LENGEN_HOME`) behind Debian's nginx with
deploy/nginx.conf, on loopback: health answers through the proxy, chromium's session (page and WebSocket)
works through it and stays on one replica, a run trained through one replica is served by the other, and
killing the other replica leaves that browser working while a newcomer lands on the survivor."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from lengen.store import RunStore
from tests.helpers import proxy
from tests.helpers.browser import CHART, SHOTS, open_page, settle
from tests.helpers.serving import serve_checkout

pytestmark = pytest.mark.slow
OWN_SHOTS = SHOTS / "replicas"


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict]:
    if reason := proxy.missing():
        pytest.skip(reason)
    home = Path(tempfile.mkdtemp(prefix="lengen-shared-home-"))
    env = {"LENGEN_HOME": str(home), "STREAMLIT_SERVER_COOKIE_SECRET": "one-secret-for-every-replica"}
    with contextlib.ExitStack() as stack:
        replicas = [stack.enter_context(serve_checkout(env=env)) for _ in range(2)]
        for replica in replicas:
            replica["port"] = int(replica["url"].rsplit(":", 1)[1])
        front = stack.enter_context(proxy.serve_proxy([r["port"] for r in replicas]))
        yield {"home": home, "replicas": replicas, "proxy": front["url"], "figures": {}}
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def tab(cluster, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = context.new_page()
    page.goto(cluster["proxy"])
    page.get_by_role("heading", name="The claims, and where to see them").wait_for(timeout=120_000)
    settle(page)
    return page


def replica_of(tab, cluster) -> dict:
    """The replica this browser is pinned to: the proxy names who answered a request carrying its cookie."""
    response = tab.request.get(f"{cluster['proxy']}/_stcore/health")
    address = response.headers["x-lengen-replica"]
    return next(r for r in cluster["replicas"] if address.endswith(f":{r['port']}"))


def health_seconds(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
        assert response.status == 200 and response.read() == b"ok"
    return time.perf_counter() - start


def test_health_through_the_proxy_answers_within_a_second(cluster) -> None:
    waits = [health_seconds(cluster["proxy"]) for _ in range(20)]
    cluster["figures"]["health_s_two_replicas"] = [round(w, 4) for w in waits]
    assert max(waits) < 1.0, f"health through the proxy took up to {max(waits):.2f} s"


def test_a_browser_works_through_the_proxy_and_stays_on_one_replica(tab, cluster) -> None:
    cookies = {c["name"]: c["value"] for c in tab.context.cookies()}
    assert cookies.get("lengen_route"), "the proxy gave the browser no route cookie"
    pinned = {replica_of(tab, cluster)["port"] for _ in range(5)}
    assert len(pinned) == 1, f"one browser's requests went to replicas {pinned}"
    open_page(tab, "Dilution")  # its charts come over the session's WebSocket, through the proxy
    tab.wait_for_function("n => document.querySelectorAll('.js-plotly-plot').length >= n", arg=2, timeout=180_000)
    assert not tab.locator('[data-testid="stException"]').count()
    OWN_SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=OWN_SHOTS / "dilution-through-proxy.png", full_page=True)


def test_a_run_trained_through_one_replica_is_served_by_both(tab, cluster) -> None:
    open_page(tab, "Train")
    steps = tab.get_by_role("spinbutton", name="Steps", exact=True)
    steps.fill("40")
    steps.press("Tab")
    tab.get_by_role("button", name="Train", exact=True).click()
    tab.get_by_text("saved and selected").wait_for(timeout=240_000)
    settle(tab)
    OWN_SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=OWN_SHOTS / "train-through-proxy.png", full_page=True)
    store = RunStore(cluster["home"])
    runs = store.list_runs()
    assert len(runs) == 1 and store.corrupt_runs() == {}
    assert not [p for p in store.runs_dir.iterdir() if p.name.startswith(".tmp-")]
    for replica in cluster["replicas"]:  # each replica reads the one store: the run's zip from either
        with urllib.request.urlopen(f"{replica['url']}/download/{runs[0].run_id}.zip", timeout=60) as response:
            assert response.status == 200 and response.read(2) == b"PK"


def test_killing_the_other_replica_leaves_the_browser_working(tab, cluster, browser) -> None:
    mine = replica_of(tab, cluster)
    other = next(r for r in cluster["replicas"] if r is not mine)
    other["process"].kill()
    other["process"].wait(timeout=30)
    waits = [health_seconds(cluster["proxy"]) for _ in range(10)]  # the proxy fails over to the survivor
    cluster["figures"]["health_s_one_replica_killed"] = [round(w, 4) for w in waits]
    (SHOTS.parent / "replicas.json").write_text(json.dumps(cluster["figures"], indent=1))
    assert max(waits) < 1.0, f"health through the proxy took up to {max(waits):.2f} s with a replica down"
    open_page(tab, "Carrier")
    tab.wait_for_selector(CHART, timeout=180_000)
    assert re.search(r"\b40 steps", tab.locator('[data-testid="stMain"]').inner_text())  # the run trained above
    assert not tab.locator('[data-testid="stException"]').count()
    newcomer = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    newcomer.goto(cluster["proxy"])  # whatever its cookie hashes to, it lands on the survivor
    newcomer.get_by_role("heading", name="The claims, and where to see them").wait_for(timeout=120_000)
    assert replica_of(newcomer, cluster) is mine
    settle(newcomer)
    newcomer.screenshot(path=OWN_SHOTS / "newcomer-after-a-replica-died.png", full_page=True)

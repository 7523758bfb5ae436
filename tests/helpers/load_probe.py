"""The load test's observers, each in a process of its own at normal priority, so that what they
measure is the server and not the test process (whose browser-driving thread runs at a low priority
and would hold up a probe thread sharing its interpreter lock).

    python -m tests.helpers.load_probe health URL OUT    # /_stcore/health once a second
    python -m tests.helpers.load_probe newcomer URL OUT  # a fresh visitor opens the Train page every ~5 s

(from the repository root, as tests/e2e/test_load.py starts them).

Each appends one JSON line per observation to OUT ({"latency_s": seconds, or null when it failed:
10 s for a health check, 60 s for a page; a health check behind the topology's proxy also names the
replica that answered, nginx's `X-Lengen-Replica`; a failed one says why and after how long) and runs
until it is terminated.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request

from tests.helpers.browser import CHROMIUM

BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]


def health(url: str, record) -> None:
    while True:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as answer:
                record(time.monotonic() - start, answer.headers.get("X-Lengen-Replica"))
        except OSError as error:  # refused, timed out, or an HTTP error status (502 from the proxy, 503)
            record(None, error=f"{type(error).__name__}: {error}"[:200], after=time.monotonic() - start)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))


def newcomer(url: str, record) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        while True:
            context = browser.new_context(viewport={"width": 1024, "height": 900})
            page = context.new_page()
            start = time.monotonic()
            try:
                page.goto(f"{url}/train", wait_until="commit", timeout=60_000)
                page.get_by_role("button", name="Train", exact=True).wait_for(timeout=60_000)
                record(time.monotonic() - start)
            except Exception:  # noqa: BLE001 — a load that did not finish in time is the finding
                record(None)
            context.close()
            time.sleep(5.0)


if __name__ == "__main__":
    mode, url, out = sys.argv[1:4]
    with open(out, "a", encoding="utf-8") as sink:

        def record(latency: float | None, replica: str | None = None, **failure) -> None:
            line = {"t": time.time(), "latency_s": latency} | ({"replica": replica} if replica else {}) | failure
            sink.write(json.dumps(line) + "\n")
            sink.flush()

        {"health": health, "newcomer": newcomer}[mode](url, record)

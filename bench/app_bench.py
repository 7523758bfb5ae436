"""The app as a user waits for it: `streamlit run serve.py` (as the README starts it) driven by headless chromium (Playwright).

Every figure is wall time from an action to the page drawn: its title present, no script run in
progress (the status widget gone), no stale element left and the expected plotly charts rendered
(`.js-plotly-plot .main-svg`). Polled every 25 ms. The server starts cold, with an empty run store
in a temporary LENGEN_HOME (the shipped presets are read from assets/), so nothing is cached.

1. start: `streamlit run` launched → Start page drawn (the browser is already open; its launch is
   not counted). The first hit is the root URL.
2. preset → Dilution: click the "Learned (APE)" preset on Start, wait for its rerun, click Dilution
   in the sidebar → Dilution's charts drawn (cold: first evaluation of that run).
3. page switch with a run selected: Dilution → Attention (cold), → Carrier (cold), → Dilution (warm).
   The target is checked against the first (cold) switch.
4. first live update: on Train, a new seed, click Train → the live training chart drawn (the first
   progress text, "… steps/s", is timed on the way).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import ROOT

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
POLL_MS = 25
DRAWN = """([title, charts]) => {
  const main = document.querySelector('[data-testid="stMain"]');
  if (!main || document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (!Array.from(main.querySelectorAll('h1')).some(h => h.textContent.includes(title))) return false;
  if (main.querySelector('[data-stale="true"]')) return false;
  return main.querySelectorAll('.js-plotly-plot .main-svg').length >= charts;
}"""
SELECTED = """(label) => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-testid="stMain"] [data-stale="true"]')) return false;
  return Array.from(document.querySelectorAll('[data-testid="stBaseButton-primary"]'))
    .some(b => b.textContent.trim() === label);
}"""
LIVE_CHART = ".st-key-live-curve .js-plotly-plot .main-svg"
TITLES = {"Start": "lengen: why relative", "Dilution": "Accuracy against length", "Attention": "Attention beyond",
          "Carrier": "The carrier kernel", "Train": "Train a run"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None:
            raise RuntimeError("streamlit exited before it was healthy")
        if time.monotonic() > deadline:
            raise RuntimeError(f"streamlit was not healthy within {timeout:.0f} s")
        time.sleep(0.05)


def drawn(tab, page: str, charts: int, timeout_s: float) -> None:
    tab.wait_for_function(DRAWN, arg=[TITLES[page], charts], polling=POLL_MS, timeout=timeout_s * 1000)


def switch(tab, page: str, charts: int, timeout_s: float) -> float:
    start = time.perf_counter()
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=page).click()
    drawn(tab, page, charts, timeout_s)
    return time.perf_counter() - start


def measure(timeout_s: float = 240, train_steps: int = 400) -> dict:
    """All four figures in one cold server and one browser session."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        return {"error": f"no chromium at {CHROMIUM}"}
    home = Path(tempfile.mkdtemp(prefix="lengen-bench-home-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port",
               str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    result: dict = {}
    process = None
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            tab = browser.new_page(viewport={"width": 1400, "height": 2400})
            start = time.perf_counter()
            process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "LENGEN_HOME": str(home)},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_healthy(url, process, timeout_s)
            result["server_healthy_seconds"] = time.perf_counter() - start
            tab.goto(url)
            drawn(tab, "Start", 1, timeout_s)
            result["start_seconds"] = time.perf_counter() - start

            start = time.perf_counter()
            tab.get_by_role("button", name="Learned (APE)", exact=True).click()
            tab.wait_for_function(SELECTED, arg="Learned (APE)", polling=POLL_MS, timeout=timeout_s * 1000)
            result["preset_click_seconds"] = time.perf_counter() - start
            result["dilution_open_seconds"] = switch(tab, "Dilution", 2, timeout_s)
            result["preset_dilution_seconds"] = time.perf_counter() - start

            result["switch_attention_cold_seconds"] = switch(tab, "Attention", 1, timeout_s)
            result["switch_carrier_cold_seconds"] = switch(tab, "Carrier", 1, timeout_s)
            result["switch_dilution_warm_seconds"] = switch(tab, "Dilution", 2, timeout_s)
            result["page_switch_seconds"] = result["switch_attention_cold_seconds"]

            switch(tab, "Train", 0, timeout_s)
            seed = tab.get_by_role("spinbutton", name="Seed")
            seed.fill(str(10_000 + os.getpid() % 10_000))  # a config no store holds, so it really trains
            seed.press("Tab")
            steps = tab.get_by_role("spinbutton", name="Steps")
            steps.fill(str(train_steps))
            steps.press("Tab")
            start = time.perf_counter()
            tab.get_by_role("button", name="Train", exact=True).click()
            tab.get_by_text(re.compile(r"steps/s")).first.wait_for(timeout=timeout_s * 1000)
            result["first_progress_text_seconds"] = time.perf_counter() - start
            tab.wait_for_selector(LIVE_CHART, timeout=timeout_s * 1000)
            result["first_live_update_seconds"] = time.perf_counter() - start
            stop = tab.get_by_role("button", name="Stop")
            if stop.count():
                stop.first.click()
            tab.get_by_text("saved and selected").wait_for(timeout=timeout_s * 1000)
            browser.close()
    except Exception as error:  # noqa: BLE001 — a browser step that failed is a result to report, not a crash
        result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(home, ignore_errors=True)
    return result

"""The app as a user waits for it: `streamlit run serve.py` (as the README starts it) driven by headless chromium (Playwright).

Every figure is wall time from an action to the page drawn: its title present, no script run in
progress (the status widget gone), no stale element left and the expected plotly charts rendered
(`.js-plotly-plot .main-svg`). Polled every 25 ms. The server starts cold, with an empty run store
in a temporary LENGEN_HOME (the shipped presets are read from assets/), so nothing is cached.

1. start: `streamlit run` launched → Start page drawn (the browser is already open; its launch is
   not counted). The first hit is the root URL.
2. preset → Dilution: click the "Learned (APE)" preset on Start, wait for its rerun, click Dilution
   in the sidebar → Dilution's charts drawn (cold: first evaluation of that run).
3. page switch with a run selected: from Dilution to each of Attention, Carrier, Compare,
   Transformer and Theory (each its first visit: cold), and back to Dilution after each (warm: their
   median), then from Dilution to Train (cold). On Theory, which draws one tab of its sections at a time
   (ui.theory.sections), each other tab with a figure or a list is then clicked once (cold): a person
   waits for a tab as for a page. The target is checked against the slowest cold switch or tab.
4. first live update: on Train, a new seed, click Train → the live training chart drawn (the first
   progress text, "… steps/s", is timed on the way).

`measure(repeats)` starts that many cold servers, one after the other, and reports each figure's
median over them (`<figure>`) beside every value measured (`<figure>_runs`); the page-switch figure is
the median of each pass's slowest switch. A chart counts as drawn when plotly has drawn its SVG; the
router's invisible early chart (ui.early, which only starts the browser loading plotly.js) is never
counted.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
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
  const drawn = Array.from(main.querySelectorAll('.js-plotly-plot'))
    .filter(plot => plot.querySelector('.main-svg') && !plot.closest('.st-key-early-plotly'));
  return drawn.length >= charts;
}"""
SELECTED = """(label) => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-testid="stMain"] [data-stale="true"]')) return false;
  return Array.from(document.querySelectorAll('[data-testid="stBaseButton-primary"]'))
    .some(b => b.textContent.trim() === label);
}"""
LIVE_CHART = ".st-key-live-curve .js-plotly-plot .main-svg"
TITLES = {"Start": "lengen: trained short", "Dilution": "Accuracy against length", "Attention": "Attention beyond",
          "Carrier": "The carrier kernel", "Compare": "Compare runs", "Transformer": "From one head to a transformer",
          "Theory": "Theory: why a relative rule", "Train": "Train a run"}
# The pages switched to with the Learned (APE) preset selected, and the plotly charts each draws for it
SWITCHES = {"Attention": 6, "Carrier": 3, "Compare": 3, "Transformer": 0, "Theory": 0}
# Theory's tabs clicked after its first visit: figure name -> (tab label, its section's heading, its charts)
THEORY_TABS = {"live_check": ("Live check (C3)", "4. Live check", 1),
               "optimisation": ("Learned positions (C1)", "5. Can learned positions", 3),
               "glossary": ("Glossary", "7. Glossary", 0)}
TAB_DRAWN = """([title, label, heading, charts]) => {
  const main = document.querySelector('[data-testid="stMain"]');
  if (!main) return false;
  const tab = Array.from(main.querySelectorAll('[role="tab"]')).find(t => t.textContent.trim() === label);
  if (!tab || tab.getAttribute('aria-selected') !== 'true') return false;
  if (!Array.from(main.querySelectorAll('h2')).some(h => h.textContent.includes(heading))) return false;
  return (""" + DRAWN + """)([title, charts]);
}"""
DILUTION_CHARTS = 2
FIGURES = ("server_healthy_seconds", "start_seconds", "preset_click_seconds", "dilution_open_seconds",
           "preset_dilution_seconds", *(f"switch_{page.lower()}_cold_seconds" for page in SWITCHES),
           *(f"theory_tab_{name}_seconds" for name in THEORY_TABS), "switch_train_cold_seconds", "switch_dilution_warm_seconds", "page_switch_seconds", "first_progress_text_seconds",
           "first_live_update_seconds")


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


def tab_click(tab, page: str, label: str, heading: str, charts: int, timeout_s: float) -> float:
    start = time.perf_counter()
    tab.locator('[data-testid="stMain"]').get_by_role("tab", name=label, exact=True).click()
    tab.wait_for_function(TAB_DRAWN, arg=[TITLES[page], label, heading, charts], polling=POLL_MS,
                          timeout=timeout_s * 1000)
    return time.perf_counter() - start


def measure(repeats: int = 3, timeout_s: float = 240, train_steps: int = 400) -> dict:
    """Every figure, the median over `repeats` cold servers (each one pass of `session`), beside all values."""
    passes = [session(timeout_s, train_steps) for _ in range(repeats)]
    result: dict = {"repeats": repeats}
    for figure in FIGURES:
        values = [p[figure] for p in passes if figure in p]
        if values:
            result[figure] = statistics.median(values)
            result[f"{figure}_runs"] = values
    errors = [p["error"] for p in passes if "error" in p]
    if errors:
        result["error"] = f"{len(errors)} of {repeats} passes: {errors[0]}"
    return result


def session(timeout_s: float = 240, train_steps: int = 400, root: Path = ROOT, readme: bool = False,
            brief: bool = False) -> dict:
    """All four figures in one cold server and one browser session. `readme`: the server is started as the
    README starts it, `bash scripts/run.sh` in `root` (a fresh clone: bench.newcomer); `brief`: only the start
    and preset → Dilution are timed."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        return {"error": f"no chromium at {CHROMIUM}"}
    home = Path(tempfile.mkdtemp(prefix="lengen-bench-home-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    options = ["--server.headless", "true", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    command = (["bash", "scripts/run.sh", *options] if readme else
               [sys.executable, "-m", "streamlit", "run", "serve.py", *options])
    result: dict = {}
    process = None
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            tab = browser.new_page(viewport={"width": 1400, "height": 2400})
            start = time.perf_counter()
            process = subprocess.Popen(command, cwd=root, env={**os.environ, "LENGEN_HOME": str(home)},
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
            result["dilution_open_seconds"] = switch(tab, "Dilution", DILUTION_CHARTS, timeout_s)
            result["preset_dilution_seconds"] = time.perf_counter() - start
            if brief:
                browser.close()
                return result

            back = []  # every switch is from Dilution: back to it each time (warm)
            for page, charts in SWITCHES.items():
                result[f"switch_{page.lower()}_cold_seconds"] = switch(tab, page, charts, timeout_s)
                if page == "Theory":
                    for name, (label, heading, tab_charts) in THEORY_TABS.items():
                        result[f"theory_tab_{name}_seconds"] = tab_click(tab, page, label, heading, tab_charts, timeout_s)
                back.append(switch(tab, "Dilution", DILUTION_CHARTS, timeout_s))
            result["switch_dilution_warm_seconds"] = statistics.median(back)
            # Train last: its first visit made the server's first optimizer until the training process timed the
            # speed its estimate reads (lengen.calibration)
            result["switch_train_cold_seconds"] = switch(tab, "Train", 0, timeout_s)
            result["page_switch_seconds"] = max([result[f"switch_{page.lower()}_cold_seconds"] for page in (*SWITCHES, "Train")]
                                                + [result[f"theory_tab_{name}_seconds"] for name in THEORY_TABS])

            seed = tab.get_by_role("spinbutton", name="Seed")
            seed.fill(str(10_000 + os.getpid() % 10_000))  # a config no store holds, so it really trains
            seed.press("Tab")
            steps = tab.get_by_role("spinbutton", name="Steps", exact=True)
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

"""End to end: the largest transformer's Attention page, at the longest heatmap length, keeps the
Streamlit server under its memory bound (issue 13).

A 1-step run with every size limit of the config at once (8 layers × 16 heads, d_model 512; shift
task, L = 256, so 64 × L = 16,384 tokens is a heatmap length the page offers) is trained by the
command line into the test's store. A fresh `streamlit run app.py` serves it; its peak resident
memory (VmHWM of /proc/<pid>/status: the process's own high-water mark, which ru_maxrss is not
across exec) is read once it is healthy, and again after the Attention page, opened by link at
16,384 tokens, has drawn its heatmap, zoom and argmax trace with no exception. The growth must stay
under the request memory budget (`LENGEN_REQUEST_MEMORY_MB`; the map's estimate is 1.3 GB).
It can fail: the full-pattern path the page used before (every layer's and head's L × L logits and
weights, `model.attend`) grew a fresh process by 8.3 GB for this model at only 2,048 tokens, 2.7 ×
the default 3 GB budget, against 0.1 GB for the one-head path; at 16,384 tokens it would need 275 GB.
The heatmap took about 4 CPU-minutes while the drawn layer computed all 16 heads, about 20 CPU-seconds since it
computes the drawn head alone; the long timeouts stay for a shared machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

from lengen.budget import MEMORY_ENV, Budgets, attention_map_cost
from lengen_core.analysis.heatmap import MAX_HEATMAP_LENGTH
from lengen_core.config import MAX_D_MODEL, MAX_HEADS, MAX_LAYERS, RunConfig, with_changes
from tests.helpers.browser import CHART, SHOTS, settle
from tests.helpers.serving import serve_checkout

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial]  # serial: measures the server's peak memory
playwright = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
LARGEST = with_changes(RunConfig(), task="shift", n_layers=MAX_LAYERS, n_heads=MAX_HEADS, d_model=MAX_D_MODEL,
                       train_length=MAX_HEATMAP_LENGTH // 64, steps=1, batch_size=2)
ARGUMENTS = ["--task", "shift", "--layers", str(MAX_LAYERS), "--heads", str(MAX_HEADS), "--d-model", str(MAX_D_MODEL),
             "--train-length", str(LARGEST.task.train_length), "--steps", "1", "--batch-size", "2"]


def peak_bytes(pid: int) -> int:
    """VmHWM of process `pid`: its peak resident memory so far."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024


@pytest.fixture(scope="module")
def largest_run() -> str:
    """The 1-step run, trained by the command line in its own process into the test's store."""
    done = subprocess.run([sys.executable, "-m", "lengen", "train", "--json", *ARGUMENTS], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert LARGEST.run_id() in done.stdout
    return LARGEST.run_id()


@pytest.mark.timeout(3_600)  # minutes of heatmap when others share the 2 cores
def test_the_largest_transformers_attention_page_keeps_the_server_under_its_memory_bound(largest_run, browser,
                                                                                       record_property):
    budget = Budgets.from_env().memory_bytes
    estimate = attention_map_cost(LARGEST, MAX_HEATMAP_LENGTH, 0).memory_bytes
    length = str(MAX_HEATMAP_LENGTH)
    with serve_checkout({MEMORY_ENV: str(budget >> 20)}) as served:
        pid = served["process"].pid
        baseline = peak_bytes(pid)
        tab = browser.new_page(viewport={"width": 1400, "height": 2400})
        tab.goto(f"{served['url']}/attention?{urlencode({'run': largest_run, 'lengths': length, 'trace': length})}")
        tab.locator('[data-testid="stSidebar"]').get_by_text(f"Run id: {largest_run}").wait_for(timeout=600_000)
        tab.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= 3", timeout=3_300_000)
        settle(tab, 120_000)
        tab.screenshot(path=SHOTS / "attention-largest-transformer.png", full_page=True)
        text = tab.locator("body").inner_text()
        assert not tab.locator('[data-testid="stException"]').count() and "Traceback" not in text
        assert "Cells: 256×256, pooling 64×64" in tab.locator("body").text_content()  # the map at 16,384 tokens is
        # drawn (its caption's rest, folded in an expander)
        grown = peak_bytes(pid) - baseline
        tab.close()
    mb = 1 << 20
    assert grown < budget, (
        f"the server's peak memory grew by {grown / mb:,.0f} MB above its {baseline / mb:,.0f} MB baseline while "
        f"drawing the {MAX_LAYERS}×{MAX_HEADS} transformer's map at {MAX_HEATMAP_LENGTH:,} tokens: over the "
        f"{budget / mb:,.0f} MB request budget ({MEMORY_ENV}); the estimate was {estimate / mb:,.0f} MB")
    for name, value in (("baseline_mb", baseline), ("grown_mb", grown), ("budget_mb", budget), ("estimate_mb", estimate)):
        record_property(name, round(value / mb))  # in the JUnit report (--junitxml, junit_family=legacy)

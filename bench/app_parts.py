"""Where an app figure's seconds go, part by part, each in a fresh process: the server's own work apart
from the browser's, and the training process's warm-up that runs beside the first page switches.

    .venv/bin/python -m bench.app_parts            # JSON on stdout, one line per part on stderr

`app_bench` times what a person waits for in chromium; these are the pieces of it that one process can
time alone, in CPU seconds beside wall seconds (CPU seconds move less with the machine's load):

1. `imports`: the router's modules (`ui.early.LAB_MODULES`: torch, pandas, plotly and the lab), and
   `import torch` alone, in a fresh interpreter each.
2. `scripts`: the app run in `streamlit.testing.v1.AppTest` (no browser, no websocket), the router's
   modules imported first (part 1 times those): Start's first run, the "Learned (APE)" preset's rerun,
   each page's first visit with that run selected and Dilution again after each: the server's share of
   `app_bench`'s figures. The training process is not started here (its warm-up is part 3), so nothing
   else of the app runs beside them.
3. `child`: what the training process does before it can serve a Train click (lengen.
   training_process): its imports, then its throwaway warm-up step, and how much of that step is
   `torch._dynamo`'s import (the first `torch.optim` optimizer of a process imports it), then the
   reference runs it times for the Train page's estimate (lengen.calibration).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.common import ROOT

PAGES = ("dilution", "attention", "carrier", "compare", "transformer", "theory", "train")

IMPORTS = """
import json, sys, time
t, c = time.perf_counter(), time.process_time()
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c}))
"""

SCRIPTS = """
import json, os, sys, tempfile, time
os.environ["LENGEN_HOME"] = tempfile.mkdtemp(prefix="lengen-app-parts-")
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest
init = PagesManager.__init__
def router_every_run(self, *args, **kwargs):  # as a server does (tests/app/conftest.py)
    init(self, *args, **kwargs)
    PagesManager.uses_pages_directory = False
PagesManager.__init__ = router_every_run
import ui.training.pool
ui.training.pool.WARM_DELAY_SECONDS = 1e6  # no training process warming beside the scripts: the server's work alone
app = AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=300)
out = {}
def timed(name, run):
    t, c = time.perf_counter(), time.process_time()
    run()
    if app.exception:
        raise SystemExit(f"{name}: {app.exception[0].value}")
    out[name] = {"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                 "charts": len(app.get("plotly_chart")), "dynamo": "torch._dynamo" in sys.modules}
timed("start (lab imported)", app.run)
timed("preset rerun", lambda: next(b for b in app.button if b.label == "Learned (APE)").click().run())
for page in sys.argv[1:]:
    app.switch_page(f"pages/{page}.py")
    timed(f"{page} (first visit)", app.run)
    if page != "dilution":
        app.switch_page("pages/dilution.py")
        timed(f"dilution after {page}", app.run)
print(json.dumps(out))
"""

CHILD = """
import json, sys, time
t, c = time.perf_counter(), time.process_time()
import torch
from lengen.training_process import serve_child  # noqa: F401 — what the child imports
from lengen_core.config import RunConfig, with_changes
from lengen_core.training import Training
torch.set_num_threads(1)
t1, c1 = time.perf_counter(), time.process_time()
dynamo = "torch._dynamo" in sys.modules
import torch._dynamo  # what the warm-up step's optimizer imports (torch._compile._disable_dynamo)
t2, c2 = time.perf_counter(), time.process_time()
Training(with_changes(RunConfig(), d_model=8, train_length=8, batch_size=2), "cpu").step()  # the child's warm-up
t3, c3 = time.perf_counter(), time.process_time()
from lengen.calibration import measure_references
measure_references("cpu")  # the reference runs the Train page's estimate reads, timed here after the warm-up
t4, c4 = time.perf_counter(), time.process_time()
print(json.dumps({"imports": {"wall": t1 - t, "cpu": c1 - c}, "dynamo already imported": dynamo,
                  "torch._dynamo": {"wall": t2 - t1, "cpu": c2 - c1},
                  "warm-up step without it": {"wall": t3 - t2, "cpu": c3 - c2},
                  "reference runs": {"wall": t4 - t3, "cpu": c4 - c3}}))
"""


def _run(code: str, *args: str) -> dict:
    """`code` in a fresh interpreter from the project root, one torch thread; its last stdout line, as JSON."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LENGEN_MEASURE_ON_SAVE": "0"}
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{args or 'part'} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure() -> dict:
    from ui.early import LAB_MODULES

    load = {"load_average_before": list(os.getloadavg())}
    result = {"imports": {"torch": _run(IMPORTS, "torch"), "the router's modules": _run(IMPORTS, *LAB_MODULES)},
              "scripts": _run(SCRIPTS, *PAGES), "child": _run(CHILD)}
    return {**load, **result, "load_average_after": list(os.getloadavg())}


def main() -> None:
    result = measure()
    for part in ("imports", "scripts", "child"):
        for name, value in result[part].items():
            if isinstance(value, dict):
                extra = "".join(f", {k} {v}" for k, v in value.items() if k not in ("wall", "cpu"))
                print(f"{part:8} {name:28} {value['wall']:6.2f} s wall {value['cpu']:6.2f} s CPU{extra}",
                      file=sys.stderr)
    print(f"load average {result['load_average_before'][0]:.1f} before, {result['load_average_after'][0]:.1f} after",
          file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

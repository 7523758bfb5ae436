"""Issue 28: the Train page's first visit times nothing in the server. Its estimate reads the speed the
pool's training process measured; the server's interpreter never makes a `torch.optim` optimizer, whose
first construction imports `torch._dynamo` (2 CPU s with the interpreter lock held, every other session
waiting), nor builds a model on the meta device (which imports it too: the store's size check at a Train
click did), from the first visit to a finished training. A fresh interpreter, since any earlier test in
this one may have imported it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, os, sys, time
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest
init = PagesManager.__init__
def router_every_run(self, *args, **kwargs):  # as a server does (tests/app/conftest.py)
    init(self, *args, **kwargs)
    PagesManager.uses_pages_directory = False
PagesManager.__init__ = router_every_run
from lengen_core.config import RunConfig
app = AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=300).run()
app.switch_page("pages/train.py").run()  # its first visit, the pool's training process still warming or warm
def seen():
    assert not app.exception, [e.value for e in app.exception]
    return {"dynamo": "torch._dynamo" in sys.modules,
            "caption": " ".join(c.value for c in app.caption if c.value.startswith("Estimated"))}
first = seen()
from ui.training.pool import training_pool
pool, deadline = training_pool(), time.monotonic() + 240
while pool.training_speed(RunConfig()) is None and time.monotonic() < deadline:
    time.sleep(0.1)
app.run()  # the page again, once the training process has sent its measurement
measured, children = seen(), pool.training_pids()
app.number_input(key="train-seed").set_value(4242).run()  # a run no store holds: it trains
app.number_input(key="train-steps").set_value(20).run()
next(b for b in app.button if b.label == "Train").click().run()  # the store's size check counts, builds nothing
while "training_ticket" in app.session_state and time.monotonic() < deadline:
    time.sleep(0.2)
    app.run()  # its live view, then the finished run
print(json.dumps({"first": first, "measured": measured, "children": children, "trained": seen(),
                  "finished": [m.value for m in app.success]}))
"""


def test_the_train_page_reads_the_training_processs_speed_and_the_server_imports_no_dynamo():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    first, measured = result["first"], result["measured"]
    assert not first["dynamo"] and not measured["dynamo"]  # no optimizer was made in the server
    assert not result["trained"]["dynamo"] and any("Finished" in text for text in result["finished"])  # nor to train
    assert "from its measured speed" in first["caption"] or "not measured yet" in first["caption"]  # never unsaid
    assert "from its measured speed (reference runs timed where trainings run)" in measured["caption"]
    assert result["children"]  # measured there

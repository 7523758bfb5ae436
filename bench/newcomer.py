"""The cold start and preset → Dilution as a newcomer meets them, beside the bench's own figures, in one run.

    python -m bench.newcomer [--passes 3] [--out bench/results/newcomer.json]

A newcomer clones the repository and runs `bash scripts/run.sh` (the README's command): it makes `.venv` and
installs requirements.txt the first time, then starts the server. Here:

1. `git clone` of this checkout's HEAD into a temporary folder (only what is committed, no `__pycache__`);
2. the setup, timed on its own (`setup_seconds`: `ensure_venv` from scripts/venv.sh, minutes on a new venv);
3. `passes` times, alternately: a server started as a newcomer starts it (`bash scripts/run.sh` in the clone)
   and one started as bench.app_bench starts it (`python -m streamlit run serve.py` in this checkout), each
   timed from launch to the Start page's chart drawn in chromium, then preset → Dilution. The clone's first
   pass is the only one that compiles the lab's modules to bytecode (`newcomer_first_*`).

bench/README.md ("As a newcomer meets them") says why the two measures differ.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.app_bench import session
from bench.common import ROOT

FIGURES = ("start_seconds", "preset_dilution_seconds", "server_healthy_seconds")


def clone(into: Path) -> Path:
    """A fresh clone of this checkout's HEAD."""
    target = into / "lengen"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)
    return target


def set_up(root: Path) -> float:
    """The README's setup in `root` (scripts/venv.sh), in seconds."""
    start = time.perf_counter()
    subprocess.run(["bash", "-c", "source scripts/venv.sh && ensure_venv requirements.txt"], cwd=root, check=True)
    return time.perf_counter() - start


def measure(passes: int = 3, timeout_s: float = 240) -> dict:
    """Newcomer and bench figures, `passes` of each taken in turn, their medians and every value."""
    folder = Path(tempfile.mkdtemp(prefix="lengen-newcomer-"))
    try:
        root = clone(folder)
        result: dict = {"setup_seconds": set_up(root), "passes": passes}
        runs: dict[str, list[dict]] = {"newcomer": [], "bench": []}
        for _ in range(passes):
            runs["newcomer"].append(session(timeout_s, root=root, readme=True, brief=True))
            runs["bench"].append(session(timeout_s, brief=True))  # this checkout, as bench.app_bench launches it
        for side, values in runs.items():
            for figure in FIGURES:
                measured = [v[figure] for v in values if figure in v]
                if measured:
                    result[f"{side}_{figure}"] = statistics.median(measured)
                    result[f"{side}_{figure}_runs"] = measured
            errors = [v["error"] for v in values if "error" in v]
            if errors:
                result[f"{side}_error"] = errors[0]
        first = runs["newcomer"][0]
        result.update({f"newcomer_first_{figure}": first[figure] for figure in FIGURES if figure in first})
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "newcomer.json")
    args = parser.parse_args()
    result = measure(args.passes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))  # noqa: T201 — a command's report


if __name__ == "__main__":
    main()

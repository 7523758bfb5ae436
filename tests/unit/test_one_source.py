"""Each rule has one source (issue 25), read from the code: a rule typed a second time is what this
test looks for, so that one edit changes every reader.

- the minimal single head: ModelConfig.minimal / RunConfig.single_head (lengen_core.config);
- the accuracy bar: lengen_core.thresholds.ACCURACY_BAR;
- what an encoding and attention should show: lengen_core.claims;
- the length ladders: lengen.presets (lengen_core.analysis.evaluate.doublings);
- the sweep's axes: lengen.sweep.AXES.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = sorted([*(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").glob("*.py"), *(ROOT / "lengen_core").rglob("*.py"), *(ROOT / "lengen").rglob("*.py")])


def _code(path: Path) -> str:
    """The source without its docstrings and comments (prose may say 0.9 or layers 0)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def _where(pattern: str, paths, allowed=()) -> list[str]:
    found = []
    for path in paths:
        relative = str(path.relative_to(ROOT))
        if relative in allowed:
            continue
        for line in _code(path).splitlines():
            if re.search(pattern, line):
                found.append(f"{relative}: {line.strip()}")
    return found


@pytest.mark.parametrize("pattern, allowed, rule", [
    (r"n_layers\s*(==|>|!=)\s*0|not \w+\.n_layers\b", {"lengen_core/config.py"}, "ModelConfig.minimal"),
    (r"(?<![\w.])0\.9(?![\d])", {"lengen_core/thresholds.py", "ui/rules/captions.py", "ui/sweep_panels.py"},
     "lengen_core.thresholds.ACCURACY_BAR"),
    (r"encoding\s*(==|!=|in)\s*[\"'(]|attention\s*(==|!=)\s*[\"']", {"lengen/budget.py"}, "lengen_core.claims"),
    (r"<<\s*p\s+for\s+p\s+in\s+range|\(1, 2, 4, 8", {"lengen_core/analysis/evaluate.py"},
     "lengen.presets (lengen_core.analysis.evaluate.doublings)"),
    (r"vocabs", {"lengen/sweep.py", "lengen/cli.py"}, "lengen.sweep.AXES"),
    # a display name, colour or dash keyed by encoding: a table of two encodings or more is a second record
    (r"""['"](rope|learned|sinusoidal|alibi|nope)['"]\s*:.*['"](rope|learned|sinusoidal|alibi|nope)['"]\s*:""",
     {"ui/sweep_runs.py"}, "lengen_core.claims"),
])
def test_a_rule_is_typed_in_one_place(pattern, allowed, rule):
    # The claims are the app's reading of a run; lengen_core's own switches on an encoding are its mechanics
    # (a learned table's rows, the softmax's normalisation), not claims; so is the budget's price of a learned table.
    scope = [p for p in APP if rule != "lengen_core.claims" or not str(p.relative_to(ROOT)).startswith("lengen_core")]
    found = _where(pattern, scope, allowed)
    assert not found, f"read {rule} instead:\n" + "\n".join(found)

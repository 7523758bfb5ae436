"""Each rule has one source (issue 25), read from the code: a rule typed a second time is what this
test looks for, so that one edit changes every reader.

- the minimal single head: ModelConfig.minimal / RunConfig.single_head (lengen_core.config);
- the accuracy bar: lengen_core.thresholds.ACCURACY_BAR;
- what an encoding and attention should show: lengen_core.claims;
- the length ladders: lengen.first_visit.ladder, built on lengen_core.analysis.evaluate.doublings;
- the thresholds a reader sees (lengen_core.thresholds and the analysis' own: the law's tolerance, chance's, the
  carrier's active amplitude): prose formats them, never restates them (`test_prose_formats_each_threshold`);
- the sweep's axes: lengen.sweep.AXES.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lengen_core.analysis.carrier import ACTIVE_AMPLITUDE
from lengen_core.analysis.fit import LAW_TOLERANCE
from lengen_core.analysis.verdict import CHANCE_TOLERANCE
from lengen_core.thresholds import ACCURACY_BAR, ACCURACY_HALF, PREDICTION_BOUND

ROOT = Path(__file__).resolve().parents[2]
# Issue 41: copies left in files whose owners replace them next (each named in its issue). A copy fixed must
# leave this list (`test_a_pending_copy_is_still_there`), so it only shrinks.
PENDING = {
    "ladder": set(),
    "threshold": set(),
}
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
    (r"<<\s*(\w+)\s+for\s+\1\s+in\s+range|\(1, 2, 4, 8|doublings\((L|\w+\.train_length)\b",
     # the budget prices the horizon search's first stage, the doublings of L (not a page's ladder)
     {"lengen_core/analysis/evaluate.py", "lengen/first_visit.py", "lengen/budget.py", *PENDING["ladder"]},
     "lengen.first_visit.ladder (lengen_core.analysis.evaluate.doublings)"),
    (r"vocabs", {"lengen/sweep.py", "lengen/cli.py"}, "lengen.sweep.AXES"),
    # a display name, colour or dash keyed by encoding: a table of two encodings or more is a second record
    (r"""['"](rope|learned|sinusoidal|alibi|nope)['"]\s*:.*['"](rope|learned|sinusoidal|alibi|nope)['"]\s*:""",
     set(), "lengen_core.claims"),
])
def test_a_rule_is_typed_in_one_place(pattern, allowed, rule):
    # The claims are the app's reading of a run; lengen_core's own switches on an encoding are its mechanics
    # (a learned table's rows, the softmax's normalisation), not claims; so is the budget's price of a learned table.
    scope = [p for p in APP if rule != "lengen_core.claims" or not str(p.relative_to(ROOT)).startswith("lengen_core")]
    found = _where(pattern, scope, allowed)
    assert not found, f"read {rule} instead:\n" + "\n".join(found)


# The thresholds a reader is told, each by its constant: prose formats it (f"≥ {ACCURACY_BAR:.2f}"), so a
# restated "≥ 0.90", "within 10%" or "more than 0.05" is a second copy that the next change leaves behind.
THRESHOLDS = {
    "lengen_core.thresholds.ACCURACY_BAR": ACCURACY_BAR,
    "lengen_core.thresholds.ACCURACY_HALF (or lengen_core.analysis.heads.CARRIER_WEIGHT)": ACCURACY_HALF,
    "lengen_core.thresholds.PREDICTION_BOUND": PREDICTION_BOUND,
    "lengen_core.thresholds.ACCURACY_STEP or lengen_core.analysis.fit.LAW_TOLERANCE": LAW_TOLERANCE,
    "lengen_core.analysis.verdict.CHANCE_TOLERANCE": CHANCE_TOLERANCE,
    "lengen_core.analysis.carrier.ACTIVE_AMPLITUDE": ACTIVE_AMPLITUDE,
}
COMPARED = r"(?:≥|≤|>|<|\bbelow|\babove|\bwithin|\bat least|\bat most|\bmore than|\bless than)\s*"


def _threshold_pattern(value: float) -> re.Pattern:
    """A comparison with `value` written as a reader would see it: 0.9, 0.90 or 90%."""
    forms = sorted({f"{value:g}", f"{value:.2f}", f"{value:.0%}"}, key=len, reverse=True)
    return re.compile(COMPARED + "(?:" + "|".join(re.escape(form) for form in forms) + r")(?!\d)")


def _prose(path: Path) -> list[tuple[int, str]]:
    """Every string a reader may see in `path` (plain and the text of f-strings), without the docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(getattr(node, "body", None), list) and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def _restated(rule: str, paths) -> list[str]:
    pattern = _threshold_pattern(THRESHOLDS[rule])
    return [f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r} in {text[:70]!r}"
            for path in paths for line, text in _prose(path) for match in pattern.finditer(text)]


@pytest.mark.parametrize("rule", THRESHOLDS)
def test_prose_formats_each_threshold(rule):
    scope = [p for p in APP if str(p.relative_to(ROOT)) not in PENDING["threshold"]]
    found = _restated(rule, scope)
    assert not found, f"format {rule} instead:\n" + "\n".join(found)


def test_the_prose_guard_sees_a_restated_threshold(tmp_path):
    """The guard finds a threshold restated in a plain string and in an f-string's text, not in a docstring or in
    a number formatted from its constant."""
    source = tmp_path / "caption.py"
    source.write_text('"""Docstrings may say ≥ 0.90."""\n'
                      'A = "stays ≥ 0.90 up to"\n'
                      'B = f"the law fits within 10% at {n}"\n'
                      'C = f"stays ≥ {ACCURACY_BAR:.2f} up to {n}; misses by more than {PREDICTION_BOUND:g}"\n',
                      encoding="utf-8")
    texts = [text for _, text in _prose(source)]
    assert sum(bool(_threshold_pattern(ACCURACY_BAR).search(t)) for t in texts) == 1
    assert sum(bool(_threshold_pattern(LAW_TOLERANCE).search(t)) for t in texts) == 1
    assert not any(_threshold_pattern(PREDICTION_BOUND).search(t) for t in texts)


def test_a_pending_copy_is_still_there():
    """Each file PENDING excuses still holds its copy: once fixed, it leaves the list."""
    ladder = r"<<\s*(\w+)\s+for\s+\1\s+in\s+range|\(1, 2, 4, 8|doublings\((L|\w+\.train_length)\b"
    for relative in sorted(PENDING["ladder"]):
        assert _where(ladder, [ROOT / relative]), f"{relative} no longer copies the ladder: drop it from PENDING"
    for relative in sorted(PENDING["threshold"]):
        assert any(_restated(rule, [ROOT / relative]) for rule in THRESHOLDS), \
            f"{relative} no longer restates a threshold: drop it from PENDING"

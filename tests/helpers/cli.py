"""The command line run in-process (`cli.main`), and the checks the CLI tests share."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from lengen import cli


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_cli(*argv: str) -> Outcome:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=stdout, stderr=stderr)
    return Outcome(code, stdout.getvalue(), stderr.getvalue())


def strict_json(text: str) -> Any:
    """Parse exactly one JSON document; NaN and ±Infinity (which `json` accepts by default) raise."""

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


def ok_json(*argv: str) -> Any:
    outcome = run_cli(*argv)
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr == ""
    return strict_json(outcome.stdout)


def assert_user_error(outcome: Outcome, *fragments: str) -> str:
    """Exit 2, nothing on stdout, one `lengen: error:` line on stderr naming every fragment."""
    assert outcome.code == 2, outcome
    assert outcome.stdout == ""
    assert outcome.stderr.endswith("\n") and outcome.stderr.count("\n") == 1, outcome.stderr
    assert outcome.stderr.startswith("lengen: error: ")
    assert "Traceback" not in outcome.stderr
    for fragment in fragments:
        assert fragment in outcome.stderr, (fragment, outcome.stderr)
    return outcome.stderr

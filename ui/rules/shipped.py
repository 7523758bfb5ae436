"""The rule measurements shipped with the presets (lengen.shipped_rules): which requests ship, and
reading them back in the rules view, so the "long-context rules" lesson's steps and the Dilution page's rules
at their defaults open a preset at once.

Shipped: every request a `rules-chart` lesson step makes (`step_request`: the step's rules after none, at the
Dilution page's lengths up to the step's longest, DILUTION_SAMPLES), and on every single-head preset each rule
defined for it at its default parameter, as the Dilution page first asks it (`dilution_request`). Built by
`python -m scripts.build_presets --rules`; tests/unit/test_shipped_rules.py checks that each is shipped and
is what the app computes.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from lengen.first_visit import allowed
from lengen.presets import DILUTION_SAMPLES, PRESETS, dilution_lengths
from lengen.shipped_rules import shipped_requests, shipped_rule
from lengen_core.analysis.rules import RULES, parse_rule
from lengen_core.measure import Measurement
from lengen_core.training import Run
from ui.analyses import rule_lengths
from ui.rules.select import why_rule_undefined

Request = tuple[tuple[str, ...], tuple[int, ...], int]  # the rules' labels (none first), the lengths, the samples


def step_request(step, run: Run) -> Request:
    """What a `rules-chart` lesson step (ui.lessons.dilution.rules_chart) measures of its preset `run`."""
    labels = ("none", *(parse_rule(part).label for part in step.option("rules").split(",")))
    return labels, allowed(run, dilution_lengths(run.config, step.option("longest"))), DILUTION_SAMPLES


def dilution_request(run: Run) -> Request:
    """Every rule defined for `run` at its default, at the Dilution page's first lengths and samples."""
    labels = ("none", *(name for name, rule in RULES.items()
                        if not rule().trivial and why_rule_undefined(rule(), run.config) is None))
    return labels, rule_lengths(allowed(run, dilution_lengths(run.config))), DILUTION_SAMPLES


def lesson_requests(runs: dict[str, Run]) -> dict[str, list[Request]]:
    """run id -> the requests of every `rules-chart` step of every lesson, for the presets in `runs` (by run id)."""
    from ui.lessons.files import load_lessons  # the lessons import the rules view: read here, at call time

    found: dict[str, list[Request]] = {}
    for lesson in load_lessons()[0].values():
        for step in lesson.steps:
            if step.element == "rules-chart":
                run = runs[PRESETS[step.presets[0]].run_id()]
                found.setdefault(run.run_id, []).append(step_request(step, run))
    return found


@st.cache_data(show_spinner=False, max_entries=16)
def _shipped_file(run_id: str) -> dict[str, Any]:
    return shipped_requests(run_id)


def shipped_measurement(run: Run, label: str, lengths: tuple[int, ...], samples: int) -> Measurement | None:
    """The run's shipped measurement under the rule `label` for exactly this request, or None: measure it."""
    return shipped_rule(run, label, lengths, samples, found=_shipped_file(run.run_id))

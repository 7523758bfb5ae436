"""The equivariance check moved to the science, lengen_core.analysis.equivariance (issue 41): this name
stays only until ui.analyses and the tests that still import it from here import it from there; then
this file goes (tests/unit/test_tree_layers.py lists the folder loop ui/analyses.py → ui/theory/ it keeps)."""

from lengen_core.analysis.equivariance import SHIFTS, ShiftCheck, check_equivariance, pair_logits

__all__ = ["SHIFTS", "ShiftCheck", "check_equivariance", "pair_logits"]

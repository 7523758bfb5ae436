"""How many examples a property test whose every example runs a model gets: a share of the profile's.

The hypothesis profiles (tests/conftest.py, chosen by HYPOTHESIS_PROFILE) set `max_examples` for
tests whose examples cost milliseconds. An example that builds a model, or runs forward passes over
hundreds of tokens, costs tens to hundreds of milliseconds, so such a test takes 1/`divisor` of the
profile's count: the CI time stays in budget and `thorough` still multiplies it. Use it as the
test's settings, with a comment on what one example costs:

    @fewer_examples(4, deadline=None)  # deadline: the first example trains the model it evaluates
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings

MIN_EXAMPLES = 10


def fewer_examples(divisor: int, **changes: Any) -> settings:
    """The loaded profile with max_examples divided by `divisor` (at least MIN_EXAMPLES), plus `changes`."""
    return settings(max_examples=max(MIN_EXAMPLES, settings().max_examples // divisor), **changes)

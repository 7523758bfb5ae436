"""What every command's answer shares: the `Result` form the command line writes, where an analysis ran, and the
small formatters of the readable summaries."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lengen.runtime import device_name
from lengen_core.analysis.verdict import Verdict
from lengen_core.training import Run


class Result(Protocol):
    """A command's answer: the `--json` document (a dictionary only here, at the edge) and the readable summary."""

    def to_json(self) -> dict[str, Any]: ...

    def text(self) -> str: ...


@dataclass(frozen=True)
class Where:
    """Where an analysis ran: the device the run was loaded onto, in words too, and where it was trained."""

    device: str
    device_name: str
    trained_on: str

    @classmethod
    def of(cls, run: Run) -> Where:
        return cls(run.device, device_name(run.device), run.training_device)

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def verdict_json(verdict: Verdict | None) -> dict[str, Any] | None:
    return None if verdict is None else verdict.to_dict()


def number(value: float | None, form: str = ".3f") -> str:
    """A number in a readable table; a dash for none."""
    return "—" if value is None else format(value, form)


def field_lines(data: Mapping[str, Any], skip: set[str]) -> list[str]:
    """`name: value`, a line per field, for the answers that are a list of named values (train, carrier)."""
    return [f"{key}: {value}" for key, value in data.items() if key not in skip]


def finite(value: Any) -> Any:
    """JSON has no infinities or NaN: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value

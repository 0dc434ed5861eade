"""What scaling a task's cases to a byte budget did (`kernelsage.tasks.scaling` works it out): plain records,
carried by a task's origin (`TaskOrigin.scaling`) to the sandbox's worker and kept with a run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CaseScaling:
    """How one case was scaled: each changed value and what it became, and its size before and after."""

    case: str
    values: tuple[tuple[int, int], ...] = ()  # (original, scaled), largest first
    bytes_before: int | None = None
    bytes_after: int | None = None
    note: str = ""  # why it does not fit, or why its size is unknown

    def describe(self) -> str:
        changes = ", ".join(f"{old}->{new}" for old, new in self.values) or "unchanged"
        size = "" if self.bytes_after is None else \
            f" ({format_bytes(self.bytes_before)} -> {format_bytes(self.bytes_after)})"
        return f"{self.case}: {changes}{size}" + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class Scaling:
    """A task's cases fitted to a byte budget: the kept cases (in suite order) and the performance case."""

    budget: int
    cases: tuple[CaseScaling, ...]
    perf_case: str
    dropped: tuple[str, ...] = ()  # input-group cases over the budget

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scaling:
        """Back from `dataclasses.asdict` after a JSON round trip (lists where tuples were)."""
        cases = tuple(CaseScaling(**{**c, "values": tuple(tuple(v) for v in c["values"])}) for c in data["cases"])
        return cls(budget=int(data["budget"]), cases=cases, perf_case=data["perf_case"],
                   dropped=tuple(data.get("dropped", ())))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def format_bytes(size: int | None) -> str:
    """1536 -> '1.5 KiB' (binary units, three significant digits)."""
    if size is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} B"

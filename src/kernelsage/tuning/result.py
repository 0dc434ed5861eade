"""What a tuning run records: every configuration tried with its verdict and latest timings, and the winner
against the default. Plain, JSON-ready dataclasses (an episode can keep `TuningResult.to_dict()` as it is)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelsage.tools.results import Timing


@dataclass
class TriedConfig:
    """One configuration: its values, its verdict (`correct`, or the status that stopped it), and the timings of
    its latest profile (the configuration's and the reference's, side by side; None when not timed)."""

    values: dict[str, int]
    verdict: str
    is_default: bool = False
    message: str = ""
    candidate: Timing | None = None
    reference: Timing | None = None
    profiles: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["candidate"] = self.candidate.model_dump() if self.candidate else None
        data["reference"] = self.reference.model_dump() if self.reference else None
        return data


@dataclass
class TuningResult:
    """A tuning run: the space, the configurations tried (in order), the winner and why. `best`: the fastest
    configuration found (the winner, or the challenger a tie kept out). `gain`: `best` against the default (the default's time over its, each relative to the reference beside it), with
    its interval; None when the default was the fastest. A tie keeps the default even when `gain` is above 1."""

    task_id: str
    backend: str
    parameters: dict[str, list[int]]
    space_size: int
    budget: int
    default: dict[str, int]
    winner: dict[str, int]
    decision: str  # why the winner is what it is, in words
    best: dict[str, int] = field(default_factory=dict)  # the fastest found, which a tie leaves as the challenger
    tried: list[TriedConfig] = field(default_factory=list)
    compiles: int = 0
    profiles: int = 0
    gain: tuple[float, float, float] | None = None  # (median, low, high)

    @property
    def evaluations(self) -> int:
        """Compiles plus profiles: what the budget counts."""
        return self.compiles + self.profiles

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "tried"}
        data["tried"] = [t.to_dict() for t in self.tried]
        data["evaluations"] = self.evaluations
        data["gain"] = list(self.gain) if self.gain else None  # as JSON reads it back (the episode's state and record)
        return data

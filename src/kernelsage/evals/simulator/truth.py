"""The simulator's ground truth about the items of one memory, and what it observed of them.

The memory never sees any of this (which lesson an item restates, what it is truly worth where it was
shown); the measures compare what the memory learned with it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

HELPFUL, HARMFUL = 0.05, -0.05  # true values above / below these count as helpful / harmful


def contribution(lesson_stage: str, value: float, shown_in: Iterable[str]) -> float:
    """What an item contributed to one episode: its lesson's value for the operator when it was shown in
    the stage its lesson is about, else nothing. The stages' effects add up (a draft lesson changes
    correctness, a refine lesson speed), so being shown again in the other stage adds 0 and takes nothing
    away: a draft lesson shown at draft and refine contributed its value, as one shown at draft alone did.
    How often a policy reaches refining therefore does not change an item's truth."""
    return value if lesson_stage in set(shown_in) else 0.0


@dataclass
class Truth:
    """Ground truth and observations of one stream's memory (item ids are the store's)."""

    lesson_of: dict[int, int] = field(default_factory=dict)
    key_of: dict[int, int] = field(default_factory=dict)  # the item's stable key (draws.pack_key / experience_key)
    exposures: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # episodes that showed it
    value_sum: dict[int, float] = field(default_factory=lambda: defaultdict(float))  # its contributions there
    first_negative: dict[int, int] = field(default_factory=dict)  # exposures when its utility first fell below 0
    latencies: list[tuple[int, str, float]] = field(default_factory=list)  # (items in memory, phase, ms)
    memory_tokens: list[int] = field(default_factory=list)  # tokens of the items each episode was shown
    harmful_shown: list[tuple[int, int]] = field(default_factory=list)  # per episode: (items shown, harmful there)
    shown_values: list[dict[int, float]] = field(default_factory=list)  # per episode: item -> its contribution
    effects: list[tuple[float, float | None]] = field(default_factory=list)  # per episode: used value, draft / refine
    items: int = 0  # items in the memory now
    merged: int = 0  # new experiences the memory merged into near-duplicates it held
    max_hot_tokens: int = 0  # the most tokens hot memory held after any consolidation

    def true_value(self, item_id: int) -> float:
        """Mean contribution of the item over the episodes that showed it."""
        n = self.exposures.get(item_id, 0)
        return self.value_sum[item_id] / n if n else 0.0

    def timed(self, phase: str, call: Callable[[], T]) -> T:
        """call(), its duration recorded under `phase` with the memory's size (where a stream's time goes)."""
        start = time.perf_counter()
        result = call()
        self.latencies.append((self.items, phase, (time.perf_counter() - start) * 1000))
        return result

    def remember(self, item_id: int, lesson: int, key: int) -> None:
        self.lesson_of[item_id] = lesson
        self.key_of[item_id] = key

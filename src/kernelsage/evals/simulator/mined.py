"""A warm start: mined lessons that every policy's memory holds from the start, beside the knowledge pack.

`kernelsage memory mine` rewinds known-good kernels one optimization at a time and keeps a removal that
makes the kernel measurably slower as a cold experience (docs/memory.md, "Mined experience"). Here a mined
lesson is modelled in the world's own terms: an instance of one of the world's lessons, chosen the way the
mining keeps them (a speed lesson among the most valuable for a source operator), stored as a cold
experience with provenance "mined" and no history. Its worth is its lesson's, exactly as for an experience
of the same lesson learned by the stream; from then on the memory treats it like any other item. The
assumptions and their defaults are in docs/simulator.md ("Warm start"). Pure functions of their arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from kernelsage.errors import ConfigurationError
from kernelsage.evals.simulator import draws
from kernelsage.evals.simulator.world import World
from kernelsage.memory_backend.items import NewItem

PROVENANCE = "mined"  # as kernelsage.mining.lesson declares it
DEFAULT_LESSONS = 3  # the mining bench kept 3 lessons (of 15 variants of 5 cpu kernels)
_MAX_DRAWS_PER_LESSON = 50  # source operators tried per mined lesson before giving up (small worlds)


@dataclass(frozen=True, kw_only=True)
class WarmStart:
    """How many mined lessons every memory starts with, and how they are chosen (each an assumption)."""

    lessons: int = DEFAULT_LESSONS  # at most this many distinct mined lessons
    keep_share: float = 0.2  # a kept removal is among the top fifth, by value, of the speed lessons that help
    # its source operator (3 of 15 variants were kept, each a clear gain: 2.2x, 25x, 43x)
    false_keep: float = 0.05  # the verdict kept a removal that does not help: a random speed lesson instead

    def __post_init__(self) -> None:
        if self.lessons < 0 or not 0.0 < self.keep_share <= 1.0 or not 0.0 <= self.false_keep <= 1.0:
            raise ConfigurationError(f"invalid warm start: lessons={self.lessons} must be >= 0, keep_share="
                                     f"{self.keep_share} in (0, 1] and false_keep={self.false_keep} in [0, 1]")

    def with_overrides(self, **overrides: float) -> WarmStart:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigurationError(f"unknown warm-start setting(s) {', '.join(unknown)}; use {', '.join(sorted(known))}")
        converted: dict[str, Any] = {k: int(v) if k == "lessons" else float(v) for k, v in overrides.items()}
        return replace(self, **converted)


def parse_warm_start(text: str) -> WarmStart | None:
    """`mined` (3 lessons) or `mined:N`; `cold`, `off` or `mined:0` for none."""
    name, sep, count = text.strip().partition(":")
    if name in ("cold", "off") and not sep:
        return None
    try:
        lessons = int(count) if sep else DEFAULT_LESSONS
    except ValueError:
        lessons = -1
    if name != "mined" or lessons < 0:
        raise ConfigurationError(f"cannot read warm start {text!r}: write mined, mined:N (N >= 0) or cold")
    return WarmStart(lessons=lessons) if lessons else None


@dataclass(frozen=True, kw_only=True)
class MinedLesson:
    lesson: int  # the world's lesson it restates
    source: int  # the operator whose known-good kernel it was mined from
    spurious: bool  # a false keep: not chosen for its value


def mine(world: World, warm: WarmStart, seed: int) -> list[MinedLesson]:
    """The mined lessons of one seed's world, the same for every policy (their own random stream). Each
    comes from a source operator drawn at random (the bench's known-good kernels span levels 1-3): a speed
    (refine) lesson drawn among the top `keep_share` by value of those worth more than 0 to the source and
    not mined yet, or with chance `false_keep` any speed lesson not mined yet. Distinct lessons only; fewer
    than asked where the world has too few to draw from."""
    rng = draws.generator(seed, "mined")
    refine = world.stage_lessons["refine"]
    found: list[MinedLesson] = []
    chosen: set[int] = set()
    for _ in range(warm.lessons * _MAX_DRAWS_PER_LESSON):
        if len(found) == warm.lessons or not len(refine):
            break
        source = int(rng.integers(len(world.operators)))
        spurious = bool(rng.random() < warm.false_keep)
        helpful = [lesson for lesson in refine[np.argsort(-world.values[refine, source], kind="stable")]
                   if world.values[lesson, source] > 0 and lesson not in chosen]
        # the source's kept share of what it can still teach; nothing left: this kernel keeps nothing new,
        # so false keeps stay a share of the kept lessons however large N is
        pool = np.array(helpful[: math.ceil(warm.keep_share * len(helpful))], dtype=int)
        if spurious and len(pool):
            pool = np.array([lesson for lesson in refine if lesson not in chosen], dtype=int)
        if not len(pool):
            continue
        lesson = int(rng.choice(pool))
        chosen.add(lesson)
        found.append(MinedLesson(lesson=lesson, source=source, spurious=spurious))
    return found


def mined_items(world: World, warm: WarmStart, seed: int) -> list[NewItem]:
    """The cold experience items of the mined lessons: the same texts, vectors and keys in every memory."""
    rng = draws.generator(seed, "mined", 1)  # vectors apart from the choice of lessons
    return [NewItem(text=world.item_text(m.lesson, n), evidence="simulated: mined from a known-good kernel",
                    operator=world.operators[m.source].name, kind="experience",
                    embedding=world.item_vector(m.lesson, rng).tolist(),
                    metadata={"simulated": True, "lesson": m.lesson, "key": draws.mined_key(n),
                              "provenance": PROVENANCE, "source": world.operators[m.source].name})
            for n, m in enumerate(mine(world, warm, seed))]

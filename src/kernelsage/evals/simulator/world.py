"""The synthetic world: operators with levels and categories, and latent lessons of known true value.

A lesson is a piece of know-how (e.g. "accumulate a reduction in float, not half") whose value for each
operator is fixed by construction: helpful for some operators, useless or harmful for others, general
across operators or specific to one. Memory items are noisy instances of lessons. Everything here is a pure
function of a WorldConfig and a seed; nothing reads the clock or the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernelsage.errors import ConfigurationError
from kernelsage.evals.simulator import draws

LEVELS = (1, 2, 3)
STAGES = ("draft", "refine")
# Lesson kinds, with the share of lessons of each kind (WorldConfig.kind_shares).
KINDS = ("general", "category", "specific", "useless", "harmful", "mixed")
_FILLER = ("tile", "loop", "vector", "cache", "stride", "buffer", "index", "bound", "thread", "block", "align",
           "unroll", "reduce", "scale", "accumulate", "guard", "layout", "fuse", "prefetch", "mask")


@dataclass(frozen=True, kw_only=True)
class WorldConfig:
    """The size and make-up of a world (documented in docs/simulator.md)."""

    operators_per_level: int = 16
    categories: int = 6
    lessons: int = 150
    dim: int = 64  # dimension of the synthetic embeddings
    kind_shares: dict[str, float] = field(default_factory=lambda: {
        "general": 0.10, "category": 0.30, "specific": 0.20, "useless": 0.20, "harmful": 0.12, "mixed": 0.08,
    })
    draft_share: float = 0.6  # lessons about getting a kernel correct; the rest are about making it fast
    item_noise: float = 0.25  # spread of an item's vector around its lesson's
    text_chars: tuple[int, int] = (150, 600)  # range of a lesson's text length (about 50-200 tokens)

    def __post_init__(self) -> None:
        problems = []
        if self.operators_per_level < 1 or self.categories < 1 or self.lessons < 1 or self.dim < 4:
            problems.append("operators_per_level, categories and lessons must be >= 1 and dim >= 4")
        unknown = sorted(set(self.kind_shares) - set(KINDS))
        if unknown or not self.kind_shares or any(v < 0 for v in self.kind_shares.values()) \
                or sum(self.kind_shares.values()) <= 0:
            problems.append(f"kind_shares must give non-negative shares of {', '.join(KINDS)}")
        if not 0.0 <= self.draft_share <= 1.0:
            problems.append("draft_share must lie in [0, 1]")
        if problems:
            raise ConfigurationError("invalid world: " + "; ".join(problems))


@dataclass(frozen=True, kw_only=True)
class Operator:
    index: int
    name: str
    level: int
    category: int
    t_reference: float  # the reference implementation's latency, seconds


@dataclass(frozen=True, kw_only=True)
class Lesson:
    index: int
    kind: str
    stage: str  # the stage whose outcome it changes: draft (correctness) or refine (speed)
    category: int
    text: str


@dataclass(frozen=True)
class World:
    """Operators, lessons, the true value of each lesson for each operator, and the geometry of the
    synthetic embeddings (category centres, operator and stage directions)."""

    config: WorldConfig
    operators: tuple[Operator, ...]
    lessons: tuple[Lesson, ...]
    values: np.ndarray  # [lesson, operator] in [-1, 1]
    lesson_vectors: np.ndarray  # [lesson, dim], unit
    queries: dict[str, np.ndarray]  # stage -> [operator, dim], unit
    stage_lessons: dict[str, np.ndarray]  # stage -> indices of the lessons about it

    def value(self, lesson: int, operator: int) -> float:
        return float(self.values[lesson, operator])

    def operator_mean_value(self, lesson: int, operators: np.ndarray) -> float:
        """A lesson's mean true value over some operators (what a resident rule shown to all of them is worth)."""
        return float(self.values[lesson, operators].mean()) if len(operators) else 0.0

    def item_vector(self, lesson: int, rng: np.random.Generator) -> np.ndarray:
        """A fresh noisy instance of a lesson's vector: two items of one lesson are near, not equal."""
        return _unit(self.lesson_vectors[lesson] + self.config.item_noise * _unit(rng.normal(size=self.config.dim)))

    def item_text(self, lesson: int, instance: int) -> str:
        """The retrieval text of an item of this lesson (synthetic; its length sets its token cost)."""
        return f"{self.lessons[lesson].text} (instance {instance})"


def _unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _kinds(config: WorldConfig, rng: np.random.Generator) -> list[str]:
    shares = np.array([config.kind_shares.get(k, 0.0) for k in KINDS], dtype=float)
    counts = np.floor(shares / shares.sum() * config.lessons).astype(int)
    for k in np.argsort(-shares)[: config.lessons - counts.sum()]:  # largest shares take the remainder
        counts[k] += 1
    kinds = [kind for kind, n in zip(KINDS, counts, strict=True) for _ in range(n)]
    rng.shuffle(kinds)
    return kinds


def lesson_values(kind: str, category: int, target: int, operators: tuple[Operator, ...], categories: int,
                  rng: np.random.Generator) -> np.ndarray:
    """The true value of one lesson for every operator, by its kind (the world's ground truth)."""
    n = len(operators)
    in_category = np.array([op.category == category for op in operators])
    values = np.zeros(n)
    if kind == "general":
        values[:] = rng.uniform(0.2, 0.6, size=n)
    elif kind == "category":
        values[in_category] = rng.uniform(0.4, 1.0, size=in_category.sum())
    elif kind == "specific":
        values[target] = rng.uniform(0.6, 1.0)
    elif kind == "harmful":
        values[in_category] = -rng.uniform(0.3, 1.0, size=in_category.sum())
    elif kind == "mixed":
        other = (category + 1 + int(rng.integers(max(1, categories - 1)))) % categories
        in_other = np.array([op.category == other for op in operators]) & ~in_category
        values[in_category] = rng.uniform(0.3, 0.8, size=in_category.sum())
        values[in_other] = -rng.uniform(0.3, 0.8, size=in_other.sum())
    return values  # "useless": zero everywhere


def build_world(config: WorldConfig, seed: int) -> World:
    """A world drawn from `config` with `seed`: the same arguments always give the same world."""
    rng = draws.generator(seed, "world")
    dim = config.dim
    centres = np.stack([_unit(rng.normal(size=dim)) for _ in range(config.categories)])
    stage_dirs = {stage: _unit(rng.normal(size=dim)) for stage in STAGES}
    operators: list[Operator] = []
    op_dirs: list[np.ndarray] = []
    for level in LEVELS:
        for _ in range(config.operators_per_level):
            category = int(rng.integers(config.categories))
            index = len(operators)
            operators.append(Operator(index=index, name=f"L{level}/c{category}/op{index}", level=level,
                                      category=category, t_reference=float(np.exp(rng.normal(-7.0, 1.0)))))
            op_dirs.append(_unit(rng.normal(size=dim)))
    ops = tuple(operators)
    queries = {stage: np.stack([_unit(centres[op.category] + 0.6 * op_dirs[op.index] + 0.5 * stage_dirs[stage])
                                for op in ops]) for stage in STAGES}
    general_centre = _unit(centres.mean(axis=0) + 1e-6)
    lessons, vectors, values = [], [], []
    for index, kind in enumerate(_kinds(config, rng)):
        stage = "draft" if rng.random() < config.draft_share else "refine"
        target = int(rng.integers(len(ops)))
        category = ops[target].category if kind == "specific" else int(rng.integers(config.categories))
        if kind == "general":
            base = general_centre + 0.5 * stage_dirs[stage] + 0.3 * _unit(rng.normal(size=dim))
        elif kind == "specific":
            base = centres[category] + 0.6 * op_dirs[target] + 0.5 * stage_dirs[stage] + 0.2 * _unit(
                rng.normal(size=dim))
        else:
            base = centres[category] + 0.5 * stage_dirs[stage] + 0.4 * _unit(rng.normal(size=dim))
        vectors.append(_unit(base))
        values.append(lesson_values(kind, category, target, ops, config.categories, rng))
        length = int(rng.integers(config.text_chars[0], config.text_chars[1] + 1))
        words = " ".join(_FILLER[int(i)] for i in rng.integers(len(_FILLER), size=length // 6))
        text = f"Simulated lesson {index} ({stage}, category c{category}): {words}"[:length]
        lessons.append(Lesson(index=index, kind=kind, stage=stage, category=category, text=text))
    stage_lessons = {stage: np.array([ls.index for ls in lessons if ls.stage == stage], dtype=int)
                     for stage in STAGES}
    return World(config=config, operators=ops, lessons=tuple(lessons), values=np.stack(values),
                 lesson_vectors=np.stack(vectors), queries=queries, stage_lessons=stage_lessons)


ORDERS = ("curriculum", "mixed", "level:N")


def stream_operators(world: World, order: str, episodes: int, seed: int) -> list[int]:
    """The operator of each episode: `curriculum` (level 1, then 2, then 3, each level's share of the
    episodes cycling through its operators), `mixed` (cycles through all operators, each cycle shuffled)
    or `level:N` (only level N). Cycles are shuffled with the seed; repeated operators are new episodes."""
    rng = draws.generator(seed, "order")
    by_level = {level: [op.index for op in world.operators if op.level == level] for level in LEVELS}

    def cycle(pool: list[int], count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            out += [pool[int(i)] for i in rng.permutation(len(pool))]
        return out[:count]

    if order == "curriculum":
        sizes = [episodes // 3 + (1 if k < episodes % 3 else 0) for k in range(3)]
        return [i for level, size in zip(LEVELS, sizes, strict=True) for i in cycle(by_level[level], size)]
    if order == "mixed":
        return cycle([op.index for op in world.operators], episodes)
    if order.startswith("level:"):
        try:
            level = int(order.removeprefix("level:"))
        except ValueError:
            level = -1
        if level not in by_level:
            raise ConfigurationError(f"order {order!r}: the simulated world has levels 1, 2 and 3")
        return cycle(by_level[level], episodes)
    raise ConfigurationError(f"unknown order {order!r}; use one of {', '.join(ORDERS)}")

"""A simulated task stream under one memory policy, in a namespace of its own on the real store."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kernelsage.evals.records import EpisodeRecord
from kernelsage.evals.simulator import draws
from kernelsage.evals.simulator.episode import EpisodeContext, run_episode
from kernelsage.evals.simulator.mined import WarmStart, mined_items
from kernelsage.evals.simulator.standin import StandInConfig
from kernelsage.evals.simulator.truth import HARMFUL, HELPFUL, Truth
from kernelsage.evals.simulator.world import World, WorldConfig, build_world, stream_operators
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import Memory, MemoryStore

SEED_BATCH = 5_000


@dataclass(frozen=True, kw_only=True)
class StreamSpec:
    """One stream: a policy, an order, a seed (of the world and of the stand-in) and its settings."""

    policy: str
    order: str
    seed: int
    episodes: int
    world: WorldConfig = field(default_factory=WorldConfig)
    standin: StandInConfig = field(default_factory=StandInConfig)
    params: SageParams = field(default_factory=SageParams)
    seed_items_per_lesson: int = 1  # the knowledge pack every memory starts with (one item per lesson)
    extra_seed_items: int = 0  # more starting items, instances of random lessons (the load test)
    warm_start: WarmStart | None = None  # mined lessons every memory starts with besides the pack (mined.py)
    new_experiences: bool = True  # successes add experiences (False: a fixed memory, for controlled tests)
    keep_adoption: bool = True  # keep every adoption record in the episode records (False: long load tests)
    checkpoints: int = 40  # hot-memory snapshots along the stream
    keep_namespace: bool = False
    namespace_prefix: str = "simulate"


@dataclass(frozen=True, kw_only=True)
class HotPoint:
    """Hot memory after an episode: resident rules by true value, and their tokens."""

    episode: int
    helpful: int
    neutral: int
    harmful: int
    tokens: int


@dataclass(kw_only=True)
class StreamResult:
    spec: StreamSpec
    world: World
    operators: np.ndarray  # the operator of each episode
    records: list[EpisodeRecord]
    truth: Truth
    learned: dict[int, float]  # item -> learned score at the end (utility, or Q for the value baseline)
    hot_timeline: list[HotPoint]
    hot_values: list[float]  # true value of each resident rule at the end
    committed_episodes: int  # episodes the store holds for this namespace at the end
    max_hot_tokens: int
    utility_range: tuple[float, float] | None  # lowest and highest stored utility at the end
    seconds: float

    def rule_value(self, lesson: int) -> float:
        """A resident rule is shown to every operator: its true value is the mean over the stream's episodes."""
        return self.world.operator_mean_value(lesson, self.operators)


def _seed_items(world: World, spec: StreamSpec, rng: np.random.Generator) -> list[NewItem]:
    lessons = [ls.index for ls in world.lessons for _ in range(spec.seed_items_per_lesson)]
    lessons += [int(i) for i in rng.integers(len(world.lessons), size=spec.extra_seed_items)]
    return [NewItem(text=world.item_text(lesson, n), evidence="simulated knowledge pack", kind="knowledge",
                    embedding=world.item_vector(lesson, rng).tolist(),
                    metadata={"simulated": True, "lesson": lesson, "key": draws.pack_key(n)})
            for n, lesson in enumerate(lessons)]


def _open(store: MemoryStore, world: World, spec: StreamSpec, truth: Truth, rng: np.random.Generator) -> Memory:
    name = f"{spec.namespace_prefix}/{uuid.uuid4().hex[:10]}/{spec.policy}/{spec.order}/s{spec.seed}"
    memory = store.open(name, embedding_dim=world.config.dim, policy=spec.policy, params=spec.params)
    items = _seed_items(world, spec, rng)  # the pack's draws come first: a warm start leaves the pack as it was
    if spec.warm_start is not None:
        items += mined_items(world, spec.warm_start, spec.seed)
    for offset in range(0, len(items), SEED_BATCH):
        batch = items[offset: offset + SEED_BATCH]
        start = time.perf_counter()
        ids = memory.add_items(batch)
        truth.items += len(ids)
        truth.latencies.append((truth.items, "add_items", (time.perf_counter() - start) * 1000))
        for item_id, item in zip(ids, batch, strict=True):
            truth.remember(item_id, int(item.metadata["lesson"]), int(item.metadata["key"]))
    return memory


def _hot_point(result_world: World, memory: Memory, truth: Truth, operators: np.ndarray, episode: int) -> HotPoint:
    counts = {"helpful": 0, "neutral": 0, "harmful": 0}
    tokens = 0
    for rule in memory.hot_rules():
        value = result_world.operator_mean_value(truth.lesson_of[rule.id], operators)
        counts["helpful" if value > HELPFUL else "harmful" if value < HARMFUL else "neutral"] += 1
        tokens += rule.resident_tokens
    return HotPoint(episode=episode, tokens=tokens, **counts)


def _learned(memory: Memory, world: World, truth: Truth) -> tuple[dict[int, float], tuple[float, float] | None]:
    items = memory.list_items(limit=memory.count_items())
    utilities = [item.utility for item in items]
    span = (min(utilities), max(utilities)) if utilities else None
    if memory.policy.learning == "credit":
        return {item.id: item.utility for item in items}, span
    if memory.policy.learning == "value":  # the Q value of the stage the item's lesson is about
        return {item.id: item.q_draft if world.lessons[truth.lesson_of[item.id]].stage == "draft" else item.q_refine
                for item in items}, span
    return {}, span


def run_stream(store: MemoryStore, spec: StreamSpec, *, run_id: str | None = None,
               on_episode: Callable[[int, Truth], None] | None = None) -> StreamResult:
    """Run one simulated stream on the store; its namespace is deleted afterwards unless kept.
    `on_episode(episodes done, truth)` is called after each episode (progress, partial figures)."""
    start = time.perf_counter()
    world = build_world(spec.world, spec.seed)
    operators = np.asarray(stream_operators(world, spec.order, spec.episodes, spec.seed), dtype=int)
    truth = Truth()
    memory = truth.timed("open", lambda: _open(store, world, spec, truth, draws.generator(spec.seed, "pack")))
    try:
        ctx = EpisodeContext(memory=memory, world=world, config=spec.standin,
                             run_id=run_id or f"sim-{spec.policy}-{spec.order}-s{spec.seed}", budget=spec.params.rounds,
                             top_k=spec.params.top_k, seed=spec.seed, new_experiences=spec.new_experiences,
                             keep_adoption=spec.keep_adoption)
        every = max(1, spec.episodes // max(1, spec.checkpoints))
        records, timeline = [], []
        for position, operator in enumerate(operators):
            records.append(run_episode(ctx, truth, position=position, operator=int(operator)))
            if memory.policy.uses_hot_memory and ((position + 1) % every == 0 or position + 1 == spec.episodes):
                timeline.append(truth.timed("snapshot", functools.partial(_hot_point, world, memory, truth, operators,
                                                                           position + 1)))
            if on_episode:
                on_episode(position + 1, truth)
        learned, span = truth.timed("read back", lambda: _learned(memory, world, truth))
        hot_values = [world.operator_mean_value(truth.lesson_of[r.id], operators) for r in memory.hot_rules()]
        committed = int(memory.stats()["episodes"])
    finally:
        if not spec.keep_namespace:
            truth.timed("delete", lambda: store.delete_namespace(memory.name))
    return StreamResult(spec=spec, world=world, operators=operators, records=records, truth=truth, learned=learned,
                        hot_timeline=timeline, hot_values=hot_values, committed_episodes=committed,
                        max_hot_tokens=truth.max_hot_tokens, utility_range=span,
                        seconds=time.perf_counter() - start)

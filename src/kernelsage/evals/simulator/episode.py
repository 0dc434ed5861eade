"""One simulated episode through the real memory, as the graph runs one: retrieve (with the episode id and
round, so the retrieval ledger holds what was shown), the stand-in's rounds, one `commit_episode` with the
episode's `EpisodeTrace` and its new experiences (the curator's record types and commit path), then UGC.

What the memory never sees (which lesson an item restates, its true value) is kept beside it in `Truth`.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from kernelsage.evals.records import EpisodeRecord
from kernelsage.evals.simulator import standin
from kernelsage.evals.simulator.world import Operator, World
from kernelsage.graph.records import MemoryUpdate
from kernelsage.memory_backend.items import CommitResult, ConsolidationResult, NewItem, Retrieval
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, RoundOutcome
from kernelsage.memory_backend.store import Memory

T = TypeVar("T")
HELPFUL, HARMFUL = 0.05, -0.05  # true values above / below these count as helpful / harmful


@dataclass
class Truth:
    """The simulator's ground truth about the items of one memory, and what it observed of them."""

    lesson_of: dict[int, int] = field(default_factory=dict)
    exposures: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # episodes that showed it
    value_sum: dict[int, float] = field(default_factory=lambda: defaultdict(float))  # its true value there
    first_negative: dict[int, int] = field(default_factory=dict)  # exposures when its utility first fell below 0
    latencies: list[tuple[int, str, float]] = field(default_factory=list)  # (items in memory, phase, ms)
    memory_tokens: list[int] = field(default_factory=list)  # tokens of the items each episode was shown
    harmful_shown: list[tuple[int, int]] = field(default_factory=list)  # per episode: (items shown, harmful there)
    items: int = 0  # items in the memory now
    max_hot_tokens: int = 0  # the most tokens hot memory held after any consolidation

    def true_value(self, item_id: int) -> float:
        """Mean true value of the item over the episodes that showed it (in the stage it was shown in)."""
        n = self.exposures.get(item_id, 0)
        return self.value_sum[item_id] / n if n else 0.0


@dataclass(frozen=True, kw_only=True)
class EpisodeContext:
    memory: Memory
    world: World
    config: standin.StandInConfig
    run_id: str
    budget: int
    top_k: int
    seed: int
    new_experiences: bool = True
    keep_adoption: bool = True


def _timed(truth: Truth, phase: str, call: Callable[[], T]) -> T:
    start = time.perf_counter()
    result = call()
    truth.latencies.append((truth.items, phase, (time.perf_counter() - start) * 1000))
    return result


def _effective_values(ctx: EpisodeContext, truth: Truth, retrieval: Retrieval, operator: int, stage: str) -> np.ndarray:
    """What each shown item is worth here: its lesson's value for the operator when the lesson is about this
    stage, else nothing."""
    values = []
    for shown in retrieval.shown:
        lesson = ctx.world.lessons[truth.lesson_of[shown.item.id]]
        values.append(ctx.world.value(lesson.index, operator) if lesson.stage == stage else 0.0)
    return np.asarray(values, dtype=float)


@dataclass(frozen=True, kw_only=True)
class _Stage:
    retrieval: Retrieval
    values: np.ndarray
    used: np.ndarray
    declared: np.ndarray
    round: int
    stage: str

    def exposures(self) -> list[Exposure]:
        return [
            Exposure(item_id=s.item.id, round=self.round, tier=s.tier, stage=self.stage,  # type: ignore[arg-type]
                     relevance=s.relevance, score=s.score, adopted=bool(d),
                     rationale="stand-in declared it used" if d else "stand-in declared it not used")
            for s, d in zip(self.retrieval.shown, self.declared, strict=True)
        ]

    @property
    def effect(self) -> float:
        return float(self.values[self.used].sum())

    @property
    def tokens(self) -> int:
        return sum(s.item.resident_tokens for s in self.retrieval.shown)


def _show(ctx: EpisodeContext, truth: Truth, episode_id: str, operator: int, stage: str, round_no: int,
          rng: np.random.Generator) -> _Stage:
    query = ctx.world.queries[stage][operator]
    picker = random.Random(f"{ctx.seed}:{episode_id}:{round_no}")  # the value baseline's exploration
    retrieval = _timed(truth, "retrieve", lambda: ctx.memory.retrieve(
        query, k=ctx.top_k, stage=stage, rng=picker, episode_id=episode_id, round=round_no))  # type: ignore[arg-type]
    values = _effective_values(ctx, truth, retrieval, operator, stage)
    used = standin.choose_used(values, ctx.config, rng)
    return _Stage(retrieval=retrieval, values=values, used=used, declared=standin.declare(used, ctx.config, rng),
                  round=round_no, stage=stage)


def _new_items(ctx: EpisodeContext, operator: int, transitions: list[str], stages: list[_Stage], truth: Truth,
               rng: np.random.Generator) -> list[NewItem]:
    world = ctx.world
    used = {s.stage: [(truth.lesson_of[x.item.id], float(v)) for x, v, u in
                      zip(s.retrieval.shown, s.values, s.used, strict=True) if u] for s in stages}
    column = world.values[:, operator]
    stage_lessons = world.stage_lessons
    positive = {st: idx[column[idx] > 0] for st, idx in stage_lessons.items()}
    weights = {st: column[idx] for st, idx in positive.items()}
    lessons = standin.new_lessons(transitions, used, positive, stage_lessons, weights, ctx.config, rng)
    op = world.operators[operator]
    return [
        NewItem(text=world.item_text(lesson, int(rng.integers(1_000_000))), evidence=f"simulated: it {kind}",
                operator=op.name, kind="experience", embedding=world.item_vector(lesson, rng).tolist(),
                metadata={"simulated": True, "lesson": lesson, "transition": kind})
        for lesson, kind in zip(lessons, transitions, strict=True)
    ]


def run_episode(ctx: EpisodeContext, truth: Truth, *, position: int, operator: int,
                rng: np.random.Generator) -> EpisodeRecord:
    """One episode of the stream: shows, stand-in rounds, one commit, consolidation; its record."""
    world, memory, config = ctx.world, ctx.memory, ctx.config
    op = world.operators[operator]
    episode_id = f"{ctx.run_id}:{position}:{op.name}"
    drafting = _show(ctx, truth, episode_id, operator, "draft", 1, rng)
    stages = [drafting]
    found = standin.draft(op.level, drafting.effect, ctx.budget, config, rng)
    rounds: list[RoundOutcome] = found.rounds
    t_first = t_best = None
    transitions = [name for name, happened in (("fixed a compile error", found.fixed_compile),
                                               ("fixed a wrong result", found.fixed_wrong)) if happened]
    if found.first_correct is not None:
        effect = 0.0
        if found.first_correct < ctx.budget:
            refining = _show(ctx, truth, episode_id, operator, "refine", found.first_correct + 1, rng)
            stages.append(refining)
            effect = refining.effect
        refined = standin.refine(found, op.level, op.t_reference, effect, ctx.budget, config, rng)
        rounds, t_first, t_best = refined.rounds, refined.t_first, refined.t_best
        if refined.made_faster:
            transitions.append("made it faster")
    trace = EpisodeTrace(
        episode_id=episode_id, operator=op.name, level=op.level, policy=memory.policy.name, t_first=t_first,
        t_best=t_best, exposures=tuple(e for s in stages for e in s.exposures()), rounds=tuple(rounds),
        hot_version_seen=drafting.retrieval.hot_version,
        metadata={"task_id": op.name, "model": standin.STANDIN_MODEL, "simulated": True},
    )
    learns = memory.policy.learns and ctx.new_experiences  # the curator extracts lessons only for learning policies
    lessons = _new_items(ctx, operator, transitions, stages, truth, rng) if learns else []
    committed = _timed(truth, "commit", lambda: memory.commit_episode(trace, lessons))
    for item, new in zip(committed.new_item_ids, lessons, strict=True):
        truth.lesson_of[item] = int(new.metadata["lesson"])
    truth.items += len(committed.new_item_ids)
    consolidation = None
    if memory.policy.uses_hot_memory:
        consolidation = _timed(truth, "consolidate", lambda: memory.consolidate())
        truth.max_hot_tokens = max(truth.max_hot_tokens, consolidation.tokens_used)
    _observe(ctx, truth, stages, episode_id)
    truth.memory_tokens.append(sum(s.tokens for s in stages))
    return _record(ctx, position, op, episode_id, rounds, t_first, t_best, trace, committed, consolidation)


def _observe(ctx: EpisodeContext, truth: Truth, stages: list[_Stage], episode_id: str) -> None:
    """Count what was shown and its true value; note when an item's stored utility first fell below 0."""
    seen: dict[int, list[float]] = defaultdict(list)
    for s in stages:
        for shown, value in zip(s.retrieval.shown, s.values, strict=True):
            seen[shown.item.id].append(float(value))
    for item, values in seen.items():
        truth.exposures[item] += 1
        truth.value_sum[item] += sum(values) / len(values)
    truth.harmful_shown.append((len(seen), sum(min(v) < HARMFUL for v in seen.values())))
    if ctx.memory.policy.learning == "credit":
        for item, (_, _, after) in ctx.memory.episode_credits(episode_id).items():
            if after < 0 and item not in truth.first_negative:
                truth.first_negative[item] = truth.exposures[item]


def _record(ctx: EpisodeContext, position: int, op: Operator, episode_id: str, rounds: list[RoundOutcome],
            t_first: float | None, t_best: float | None, trace: EpisodeTrace, committed: CommitResult,
            consolidation: ConsolidationResult | None) -> EpisodeRecord:
    """The episode as the stream runner records one (a unique task id per episode: operators repeat)."""
    correct = [r for r in rounds if r.correct]
    solved = t_first is not None and t_best is not None
    return EpisodeRecord(
        task_id=f"{op.name}#{position}", episode_id=episode_id, level=op.level, solved=solved, rounds=len(rounds),
        candidates=len(rounds), compiled=sum(r.compiled for r in rounds), correct_candidates=len(correct),
        first_correct_round=correct[0].round if correct else None, t_first=t_first, t_best=t_best,
        t_reference=op.t_reference, self_speedup=t_first / t_best if solved else None,  # type: ignore[operator]
        speedup=op.t_reference / t_best if solved else None,  # type: ignore[operator]
        measured_speedup=op.t_reference / t_best if solved else None,  # type: ignore[operator]
        run_id=ctx.run_id, policy=ctx.memory.policy.name, model=standin.STANDIN_MODEL, backend="simulated",
        namespace=ctx.memory.name, position=position, category=f"c{op.category}",
        adoption=list(trace.exposures) if ctx.keep_adoption else [],
        memory=MemoryUpdate(updated=committed.applied, policy=ctx.memory.policy.name,
                            terminal_score=committed.terminal_score, credits=committed.credits,
                            new_items=committed.new_item_ids, consolidation=consolidation),
    )

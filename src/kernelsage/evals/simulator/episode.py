"""One simulated episode through the real memory, as the graph runs one: retrieve (with the episode id and
round, so the retrieval ledger holds what was shown), the stand-in's rounds, one `commit_episode` with the
episode's `EpisodeTrace` and its new experiences (the curator's record types and commit path), then UGC.

What the memory never sees (which lesson an item restates, its true value) is kept beside it in `Truth`.
Every draw comes from a stream of its own (draws.py): the stand-in's are keyed by the episode's position
(and per item by the item's stable key), the policy's choices by the policy's name.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from kernelsage.evals.records import EpisodeRecord
from kernelsage.evals.simulator import draws, standin
from kernelsage.evals.simulator.truth import HARMFUL, Truth, contribution
from kernelsage.evals.simulator.world import Operator, World
from kernelsage.graph.records import MemoryUpdate
from kernelsage.memory_backend.items import CommitResult, ConsolidationResult, NewItem, Retrieval
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, RoundOutcome
from kernelsage.memory_backend.store import Memory

TRANSITIONS = ("fixed a compile error", "fixed a wrong result", "made it faster")  # index: its draws' key


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

    @property
    def policy_key(self) -> int:
        return draws.policy_key(self.memory.policy.name)


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


def _show(ctx: EpisodeContext, truth: Truth, episode_id: str, position: int, operator: int, stage: str,
          round_no: int) -> _Stage:
    query = ctx.world.queries[stage][operator]
    stage_key = draws.STAGE_KEYS[stage]
    # the value baseline's exploration: a choice of the policy, from the policy's own stream
    picker = random.Random(draws.integer(ctx.seed, "policy", ctx.policy_key, position, stage_key))
    retrieval = truth.timed("retrieve", lambda: ctx.memory.retrieve(
        query, k=ctx.top_k, stage=stage, rng=picker, episode_id=episode_id, round=round_no))  # type: ignore[arg-type]
    values = _effective_values(ctx, truth, retrieval, operator, stage)
    keys = np.array([truth.key_of[s.item.id] for s in retrieval.shown], dtype=np.uint64)
    uniforms = draws.item_uniforms(ctx.seed, "standin", (position, stage_key), keys, 3)  # use, keep, declare
    used = standin.choose_used(values, ctx.config, uniforms[:, :2])
    return _Stage(retrieval=retrieval, values=values, used=used,
                  declared=standin.declare(used, ctx.config, uniforms[:, 2]), round=round_no, stage=stage)


def _new_items(ctx: EpisodeContext, position: int, operator: int, transitions: list[str], stages: list[_Stage],
               truth: Truth) -> list[NewItem]:
    world = ctx.world
    used = {s.stage: [(truth.lesson_of[x.item.id], float(v)) for x, v, u in
                      zip(s.retrieval.shown, s.values, s.used, strict=True) if u] for s in stages}
    column = world.values[:, operator]
    stage_lessons = world.stage_lessons
    positive = {st: idx[column[idx] > 0] for st, idx in stage_lessons.items()}
    weights = {st: column[idx] for st, idx in positive.items()}
    kinds = [TRANSITIONS.index(t) for t in transitions]
    rngs = [draws.generator(ctx.seed, "standin", position, draws.LESSON, k) for k in kinds]
    lessons = standin.new_lessons(transitions, used, positive, stage_lessons, weights, ctx.config, rngs)
    op = world.operators[operator]
    items = []
    for lesson, kind, k in zip(lessons, transitions, kinds, strict=True):
        rng = draws.generator(ctx.seed, "standin", position, draws.ITEM, k)  # its text and vector
        items.append(NewItem(
            text=world.item_text(lesson, int(rng.integers(1_000_000))), evidence=f"simulated: it {kind}",
            operator=op.name, kind="experience", embedding=world.item_vector(lesson, rng).tolist(),
            metadata={"simulated": True, "lesson": lesson, "transition": kind,
                      "key": draws.experience_key(position, k)}))
    return items


def run_episode(ctx: EpisodeContext, truth: Truth, *, position: int, operator: int) -> EpisodeRecord:
    """One episode of the stream: shows, stand-in rounds, one commit, consolidation; its record."""
    world, memory, config = ctx.world, ctx.memory, ctx.config
    op = world.operators[operator]
    episode_id = f"{ctx.run_id}:{position}:{op.name}"
    drafting = _show(ctx, truth, episode_id, position, operator, "draft", 1)
    stages = [drafting]
    found = standin.draft(op.level, drafting.effect, ctx.budget, config,
                          draws.generator(ctx.seed, "standin", position, draws.DRAFT))
    rounds: list[RoundOutcome] = found.rounds
    t_first = t_best = refine_effect = None
    transitions = [name for name, happened in zip(TRANSITIONS[:2], (found.fixed_compile, found.fixed_wrong),
                                                  strict=True) if happened]
    if found.first_correct is not None:
        effect = 0.0
        if found.first_correct < ctx.budget:
            refining = _show(ctx, truth, episode_id, position, operator, "refine", found.first_correct + 1)
            stages.append(refining)
            effect = refine_effect = refining.effect
        refined = standin.refine(found, op.level, op.t_reference, effect, ctx.budget, config,
                                 draws.generator(ctx.seed, "standin", position, draws.REFINE))
        rounds, t_first, t_best = refined.rounds, refined.t_first, refined.t_best
        if refined.made_faster:
            transitions.append(TRANSITIONS[2])
    trace = EpisodeTrace(
        episode_id=episode_id, operator=op.name, level=op.level, policy=memory.policy.name, t_first=t_first,
        t_best=t_best, exposures=tuple(e for s in stages for e in s.exposures()), rounds=tuple(rounds),
        hot_version_seen=drafting.retrieval.hot_version,
        metadata={"task_id": op.name, "model": standin.STANDIN_MODEL, "simulated": True},
    )
    learns = memory.policy.learns and ctx.new_experiences  # the curator extracts lessons only for learning policies
    lessons = _new_items(ctx, position, operator, transitions, stages, truth) if learns else []
    committed = truth.timed("commit", lambda: memory.commit_episode(trace, lessons))
    for item, new in _stored(memory, committed, lessons):
        truth.remember(item, int(new.metadata["lesson"]), int(new.metadata["key"]))
    truth.items += len(committed.new_item_ids)
    truth.merged += len(committed.merged_into)
    consolidation = None
    if memory.policy.uses_hot_memory:
        # random consolidation's order is the policy's choice: drawn from its own stream
        seed = draws.integer(ctx.seed, "policy", ctx.policy_key, position, 2)
        consolidation = truth.timed("consolidate", lambda: memory.consolidate(seed=seed))
        truth.max_hot_tokens = max(truth.max_hot_tokens, consolidation.tokens_used)
    _observe(ctx, truth, stages, committed, operator)
    truth.effects.append((drafting.effect, refine_effect))
    truth.memory_tokens.append(sum(s.tokens for s in stages))
    return _record(ctx, position, op, episode_id, rounds, t_first, t_best, trace, committed, consolidation)


def _stored(memory: Memory, committed: CommitResult, lessons: list[NewItem]) -> list[tuple[int, NewItem]]:
    """Each experience the commit stored, with the new item it came from. The memory merges an experience
    that near-duplicates one it holds into that one (its lesson stays the held item's); then which were
    stored is read back from the stored items' keys."""
    if len(committed.new_item_ids) == len(lessons):
        return list(zip(committed.new_item_ids, lessons, strict=True))
    by_key = {int(new.metadata["key"]): new for new in lessons}
    return [(item, by_key[int(memory.get_item(item).metadata["key"])]) for item in committed.new_item_ids]


def _observe(ctx: EpisodeContext, truth: Truth, stages: list[_Stage], committed: CommitResult, operator: int) -> None:
    """Count what was shown and what it contributed; note when an item's stored utility first fell below 0."""
    shown_in: dict[int, list[str]] = defaultdict(list)
    for s in stages:
        for shown in s.retrieval.shown:
            shown_in[shown.item.id].append(s.stage)
    contributed = {}
    for item, in_stages in shown_in.items():
        lesson = ctx.world.lessons[truth.lesson_of[item]]
        contributed[item] = contribution(lesson.stage, ctx.world.value(lesson.index, operator), in_stages)
        truth.exposures[item] += 1
        truth.value_sum[item] += contributed[item]
    truth.shown_values.append(contributed)
    truth.harmful_shown.append((len(contributed), sum(v < HARMFUL for v in contributed.values())))
    if ctx.memory.policy.learning == "credit":
        # the store's credit audit as the commit stored it (what Memory.episode_credits reads back)
        for item, (_, _, after) in committed.stored_credits.items():
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

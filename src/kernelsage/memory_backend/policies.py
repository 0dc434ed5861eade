"""Memory methods selectable by name (METHOD §7), all sharing one store.

A policy is data: how it ranks the relevance pool, how it learns from an episode, and how it
consolidates. The store and the agent ask the policy instead of branching on its name.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend import atu, ugc, value
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, ItemStats, PoolEntry, Stage

CreditRule = Callable[[Sequence[int], set[int], float, SageParams], dict[int, float]]
Ranking = Literal["none", "relevance", "utility", "value"]
Learning = Literal["none", "credit", "value"]
Consolidation = Literal["none", "priority", "random"]


@dataclass(frozen=True, kw_only=True)
class EpisodeUpdate:
    """What committing one episode does to memory: the score, each item's credit, the new stats."""

    terminal_score: float
    credits: dict[int, float]
    stats: dict[int, ItemStats]


@dataclass(frozen=True, kw_only=True)
class MemoryPolicy:
    name: str
    summary: str
    ranking: Ranking
    learning: Learning
    credit_rule: CreditRule | None = None
    consolidation: Consolidation = "none"

    @property
    def retrieves(self) -> bool:
        return self.ranking != "none"

    @property
    def learns(self) -> bool:
        return self.learning != "none"

    @property
    def uses_hot_memory(self) -> bool:
        return self.consolidation != "none"

    def rank(
        self, pool: Sequence[PoolEntry], *, k: int, stage: Stage, params: SageParams, rng: random.Random
    ) -> list[PoolEntry]:
        """Order a relevance pool (already the nearest items) and keep k of them."""
        if self.ranking == "none":
            return []
        if self.ranking == "utility":
            return atu.rerank(pool, params, k)
        if self.ranking == "value":
            return value.select_by_value(pool, k, stage, params, rng)
        ordered = sorted(pool, key=lambda c: (-c.relevance, c.item_id))[:k]
        return [replace(c, score=c.relevance) for c in ordered]

    def apply_episode(
        self, episode: EpisodeTrace, stats: dict[int, ItemStats], params: SageParams
    ) -> EpisodeUpdate:
        """Credit a finished episode: pure, so any stored episode can be replayed and audited."""
        shown, adopted = atu.adoption_sets(episode.exposures)
        z = atu.terminal_score(t_first=episode.t_first, t_best=episode.t_best, params=params)
        if self.learning == "none":
            return EpisodeUpdate(terminal_score=z, credits={}, stats={})
        missing = [i for i in shown if i not in stats]
        if missing:
            raise ConfigurationError(f"no statistics given for shown items {missing}")
        if self.learning == "credit":
            assert self.credit_rule is not None
            credits = self.credit_rule(shown, adopted, z, params)
            learned = {
                i: stats[i]._replace(utility=atu.update_utility(stats[i].utility, credits[i], stats[i].n_ret, params))
                for i in shown
            }
        else:
            credits, learned = _learn_values(episode, stats, params)
        counted = {i: _count_exposure(learned[i], episode, i in adopted, params) for i in shown}
        return EpisodeUpdate(terminal_score=z, credits=credits, stats=counted)


def _count_exposure(stats: ItemStats, episode: EpisodeTrace, adopted: bool, params: SageParams) -> ItemStats:
    tiers = {e.tier for e in episode.exposures if e.item_id == stats.item_id}
    return stats._replace(
        n_ret=stats.n_ret + 1,
        n_ret_cold=stats.n_ret_cold + (1 if "cold" in tiers else 0),
        n_ado=stats.n_ado + (1 if adopted else 0),
        adopting_ops=stats.adopting_ops | {episode.operator} if adopted else stats.adopting_ops,
        access=ugc.update_access(stats.access, adopted, params) if "hot" in tiers else stats.access,
    )


def _learn_values(
    episode: EpisodeTrace, stats: dict[int, ItemStats], params: SageParams
) -> tuple[dict[int, float], dict[int, ItemStats]]:
    """Stage-specific value updates, one per exposure, in round order; credit = mean reward."""
    rewards: dict[int, float] = {}
    best: float | None = None
    for outcome in sorted(episode.rounds, key=lambda r: r.round):
        if outcome.stage == "draft":
            rewards[outcome.round] = value.draft_reward(outcome.correct)
        else:
            rewards[outcome.round] = value.refine_reward(
                feasible=outcome.correct, latency=outcome.latency, best_so_far=best
            )
        if outcome.correct and outcome.latency is not None:
            best = outcome.latency if best is None else min(best, outcome.latency)
    learned = dict(stats)
    received: dict[int, list[float]] = {}
    for exposure in sorted(episode.exposures, key=lambda e: (e.round, e.item_id)):
        if exposure.round not in rewards:
            continue
        reward = rewards[exposure.round]
        current = learned[exposure.item_id]
        if exposure.stage == "draft":
            current = current._replace(q_draft=value.update_value(current.q_draft, reward, params))
        else:
            current = current._replace(q_refine=value.update_value(current.q_refine, reward, params))
        learned[exposure.item_id] = current
        received.setdefault(exposure.item_id, []).append(reward)
    shown = {e.item_id for e in episode.exposures}
    credits = {i: (sum(received[i]) / len(received[i]) if i in received else 0.0) for i in shown}
    return credits, learned


POLICIES: dict[str, MemoryPolicy] = {
    p.name: p
    for p in (
        MemoryPolicy(
            name="sage",
            summary="ATU credit (z/|A| to adopted, -beta to ignored) with utility-gated consolidation",
            ranking="utility", learning="credit", credit_rule=atu.item_credits, consolidation="priority",
        ),
        MemoryPolicy(
            name="atu-only",
            summary="ATU credit and utility reranking, no consolidation (no hot memory)",
            ranking="utility", learning="credit", credit_rule=atu.item_credits,
        ),
        MemoryPolicy(
            name="uniform",
            summary="every shown item gets the episode reward (uniform credit), with consolidation",
            ranking="utility", learning="credit", credit_rule=atu.uniform_credits, consolidation="priority",
        ),
        MemoryPolicy(
            name="random-ugc",
            summary="ATU credit with consolidation that fills the budget in random order",
            ranking="utility", learning="credit", credit_rule=atu.item_credits, consolidation="random",
        ),
        MemoryPolicy(
            name="value",
            summary="EvoKernel-style value memory: stage-specific Q values, epsilon-greedy selection",
            ranking="value", learning="value",
        ),
        MemoryPolicy(
            name="static",
            summary="retrieval by relevance only; memory is never updated",
            ranking="relevance", learning="none",
        ),
        MemoryPolicy(name="none", summary="no memory at all", ranking="none", learning="none"),
    )
}


def get_policy(name: str) -> MemoryPolicy:
    """Look a policy up by name; an unknown name lists the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown memory policy {name!r}; choose one of: {', '.join(POLICIES)}"
        ) from None

"""The value-memory baseline (EvoKernel-style, METHOD §7): stage-specific values, pure functions."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace

from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import PoolEntry, Stage


def draft_reward(feasible: bool) -> float:
    """Q1 reward for a drafting round: +1 when the candidate is correct, -1 otherwise."""
    return 1.0 if feasible else -1.0


def refine_reward(*, feasible: bool, latency: float | None, best_so_far: float | None) -> float:
    """Q2 reward for a refining round: -1 if infeasible, else tanh(log b - log l).

    b is the best latency before this round; without one the round cannot be compared (reward 0).
    The source also normalises this reward online; we use the raw bounded value (reconstruction).
    """
    if not feasible or latency is None or latency <= 0:
        return -1.0
    if best_so_far is None or best_so_far <= 0:
        return 0.0
    return math.tanh(math.log(best_so_far) - math.log(latency))


def update_value(q: float, reward: float, params: SageParams) -> float:
    """Q <- Q + alpha (r - Q)."""
    return q + params.value_alpha * (reward - q)


def select_by_value(
    pool: Sequence[PoolEntry], n: int, stage: Stage, params: SageParams, rng: random.Random
) -> list[PoolEntry]:
    """Take the top lambda*N by similarity, then N of those by Q with epsilon-greedy exploration."""
    shortlist = sorted(pool, key=lambda c: (-c.relevance, c.item_id))[: params.value_lambda * n]
    chosen: list[PoolEntry] = []
    while shortlist and len(chosen) < n:
        if rng.random() < params.value_epsilon:
            pick = rng.randrange(len(shortlist))
        else:
            values = [c.q_draft if stage == "draft" else c.q_refine for c in shortlist]
            pick = max(range(len(shortlist)), key=lambda i: (values[i], shortlist[i].relevance))
        candidate = shortlist.pop(pick)
        chosen.append(candidate)
    return [replace(c, score=c.q_draft if stage == "draft" else c.q_refine) for c in chosen]

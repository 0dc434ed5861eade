"""Utility-Gated Consolidation (METHOD §5): pure functions over plain values."""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import ItemStats


class HotCandidate(NamedTuple):
    """An item competing for hot memory: a resident rule or a validated cold item."""

    item_id: int
    utility: float
    access: float
    tokens: int


@dataclass(frozen=True, kw_only=True)
class ConsolidationPlan:
    """How the hot set changes: promoted items enter, demoted rules return to validated."""

    hot: tuple[int, ...]
    promoted: tuple[int, ...]
    demoted: tuple[int, ...]
    tokens_used: int


def is_validated(stats: ItemStats, params: SageParams) -> bool:
    """The gate: u > 0, n_ado >= K_ado and adopted on >= K_op distinct operators."""
    return stats.utility > 0 and stats.n_ado >= params.k_ado and len(stats.adopting_ops) >= params.k_op


def passes_gate(utility: np.ndarray, n_ado: np.ndarray, distinct_ops: np.ndarray, params: SageParams) -> np.ndarray:
    """`is_validated` over columns: the same three comparisons, one boolean per item."""
    return (utility > 0) & (n_ado >= params.k_ado) & (distinct_ops >= params.k_op)


def cold_access_estimate(n_ret_cold: int, eligible_episodes: int) -> float:
    """p before promotion: cold retrievals over the episodes in which the item was retrievable."""
    if eligible_episodes <= 0:
        return 0.0
    return min(1.0, n_ret_cold / eligible_episodes)


def cold_access_estimates(n_ret_cold: np.ndarray, eligible_episodes: np.ndarray) -> np.ndarray:
    """`cold_access_estimate` over columns (float64), with the same float operations."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(eligible_episodes > 0, np.minimum(1.0, n_ret_cold / eligible_episodes), 0.0)


def update_access(access: float, adopted: bool, params: SageParams) -> float:
    """p of a resident rule: p <- (1 - mu) p + mu * [adopted this episode]."""
    return (1.0 - params.mu) * access + params.mu * (1.0 if adopted else 0.0)


def priority(utility: float, access: float, tokens: int) -> float:
    """priority = u * p / L."""
    return utility * access / max(1, tokens)


def priority_columns(utility: np.ndarray, access: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """`priority` of each entry of the columns, by the same float operations (equal values)."""
    return utility * access / np.maximum(tokens, 1).astype(np.float64)


def select_hot(candidates: Sequence[HotCandidate], budget: int) -> list[int]:
    """Greedy selection by priority under a token budget.

    Scans in priority order (ties: fewer tokens, then lower id), takes each item that still fits,
    skips one that does not and keeps scanning. Items with non-positive priority never become
    resident: without positive utility and use there is no evidence the rule helps.
    """
    count = len(candidates)
    return select_hot_columns(
        np.fromiter((c.item_id for c in candidates), np.int64, count),
        np.fromiter((c.utility for c in candidates), np.float64, count),
        np.fromiter((c.access for c in candidates), np.float64, count),
        np.fromiter((c.tokens for c in candidates), np.int64, count),
        budget,
    )


def select_hot_columns(item_ids: np.ndarray, utility: np.ndarray, access: np.ndarray, tokens: np.ndarray,
                       budget: int) -> list[int]:
    """`select_hot` over columns (entry i is one candidate): the same priorities (the same float
    operations as `priority`), order and choice, ranked by numpy, since consolidation ranks thousands of
    candidates after every episode."""
    scores = priority_columns(utility, access, tokens)
    keep = scores > 0
    ids, lengths, scores = item_ids[keep], tokens[keep], scores[keep]
    order = np.lexsort((ids, lengths, -scores))  # last key first: priority down, then tokens, then id
    return _take_while_fits(zip(ids[order].tolist(), lengths[order].tolist(), strict=True), budget)


def select_random(candidates: Sequence[HotCandidate], budget: int, rng: random.Random) -> list[int]:
    """Ablation: the same budgeted scan over a random order of the pool."""
    shuffled = sorted(candidates, key=lambda c: c.item_id)
    rng.shuffle(shuffled)
    return _take_while_fits(((c.item_id, c.tokens) for c in shuffled), budget)


def _take_while_fits(ordered: Iterable[tuple[int, int]], budget: int) -> list[int]:
    """The budgeted scan: (item, tokens) in order, each taken if it still fits, the rest skipped."""
    chosen: list[int] = []
    used = 0
    for item_id, tokens in ordered:
        if used + tokens <= budget:
            chosen.append(item_id)
            used += tokens
            if used == budget:  # nothing more can fit
                break
    return chosen


def plan_consolidation(
    current_hot: Collection[int], selected: Sequence[int], tokens: dict[int, int]
) -> ConsolidationPlan:
    """Compare the selected hot set with the current one."""
    current = set(current_hot)
    chosen = set(selected)
    return ConsolidationPlan(
        hot=tuple(sorted(chosen)),
        promoted=tuple(sorted(chosen - current)),
        demoted=tuple(sorted(current - chosen)),
        tokens_used=sum(tokens[i] for i in chosen),
    )

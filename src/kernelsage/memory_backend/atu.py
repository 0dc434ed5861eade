"""Adoption-Traced Utility (METHOD §4): pure functions over plain values."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from kernelsage.errors import EpisodeError
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import Exposure, PoolEntry


def terminal_score(*, t_first: float | None, t_best: float | None, params: SageParams) -> float:
    """z = 1 - T_best / T_first for a solved episode, -delta for a failed one (reconstruction).

    Lies in [0, 1) when solved: a best kernel slower than the first is impossible by definition,
    so a larger t_best (e.g. a noisy re-measurement) counts as no gain rather than a loss.
    """
    if t_first is None:
        return -params.delta
    if t_best is None:
        t_best = t_first
    if not (math.isfinite(t_first) and math.isfinite(t_best)) or t_first <= 0 or t_best <= 0:
        raise EpisodeError(f"latencies must be finite and positive, got t_first={t_first}, t_best={t_best}")
    return max(0.0, 1.0 - t_best / t_first)


def adoption_sets(exposures: Iterable[Exposure]) -> tuple[list[int], set[int]]:
    """The items shown in an episode (first-shown order) and those adopted in any round.

    Raises EpisodeError when an exposure is still unresolved: credit needs every state.
    """
    shown: dict[int, None] = {}
    adopted: set[int] = set()
    for exposure in exposures:
        if exposure.adopted is None:
            raise EpisodeError(
                f"item {exposure.item_id} shown in round {exposure.round} has no adoption state; "
                "every shown item must be resolved before the episode is committed"
            )
        shown.setdefault(exposure.item_id, None)
        if exposure.adopted:
            adopted.add(exposure.item_id)
    return list(shown), adopted


def item_credits(shown: Sequence[int], adopted: set[int], z: float, params: SageParams) -> dict[int, float]:
    """Each adopted item gets z / |A|; each shown but not adopted item gets -beta."""
    unknown = adopted.difference(shown)
    if unknown:
        raise EpisodeError(f"items {sorted(unknown)} were adopted but never shown")
    share = z / len(adopted) if adopted else 0.0
    return {item: (share if item in adopted else -params.beta) for item in shown}


def uniform_credits(shown: Sequence[int], adopted: set[int], z: float, params: SageParams) -> dict[int, float]:
    """Ablation baseline: every shown item gets the whole episode reward, adopted or not."""
    return dict.fromkeys(shown, z)


def step_size(n_ret: int, params: SageParams) -> float:
    """eta = max(1 / (1 + n_ret), eta_min), with n_ret the updates the item has already had."""
    return max(1.0 / (1.0 + n_ret), params.eta_min)


def update_utility(utility: float, credit: float, n_ret: int, params: SageParams) -> float:
    """u <- (1 - eta) u + eta * credit."""
    eta = step_size(n_ret, params)
    return (1.0 - eta) * utility + eta * credit


def utility_score(relevance: float, utility: float, params: SageParams) -> float:
    """The late rerank score: relevance + gamma * u (reconstruction)."""
    return relevance + params.gamma * utility


def rerank(pool: Sequence[PoolEntry], params: SageParams, k: int) -> list[PoolEntry]:
    """Reorder a relevance pool by relevance + gamma * u and keep the top k.

    Ties fall back to relevance, then to the item id, so the order is deterministic.
    """
    scored = [replace(c, score=utility_score(c.relevance, c.utility, params)) for c in pool]
    scored.sort(key=lambda c: (-(c.score or 0.0), -c.relevance, c.item_id))
    return scored[:k]

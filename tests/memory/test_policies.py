"""Each memory policy ranks and learns as its method says, on plain records."""

from __future__ import annotations

import random

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend import value
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import POLICIES, get_policy
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, ItemStats, PoolEntry, RoundOutcome

PARAMS = SageParams()


def _episode(**overrides) -> EpisodeTrace:
    base = dict(
        episode_id="ep-1", operator="relu", t_first=2.0, t_best=0.5,
        exposures=(
            Exposure(item_id=1, round=1, tier="cold", adopted=True, rationale="used the tiling"),
            Exposure(item_id=2, round=1, tier="cold", adopted=False, rationale="not relevant"),
            Exposure(item_id=3, round=1, tier="hot", adopted=True, rationale="vectorised loop"),
            Exposure(item_id=3, round=2, tier="hot", stage="refine", adopted=False, rationale="already done"),
        ),
        rounds=(
            RoundOutcome(round=1, stage="draft", compiled=True, correct=True, latency=2.0),
            RoundOutcome(round=2, stage="refine", compiled=True, correct=True, latency=0.5),
        ),
    )
    return EpisodeTrace(**{**base, **overrides})


def _stats() -> dict[int, ItemStats]:
    return {
        1: ItemStats(item_id=1, utility=0.1, n_ret=2),
        2: ItemStats(item_id=2, utility=0.3, n_ret=0),
        3: ItemStats(item_id=3, utility=0.2, n_ret=40, access=0.5, state="hot"),
    }


def test_every_method_of_the_method_page_is_selectable() -> None:
    assert set(POLICIES) == {"sage", "atu-only", "uniform", "random-ugc", "value", "static", "none"}


def test_an_unknown_policy_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="choose one of: sage"):
        get_policy("sgae")


def test_sage_credits_adopted_items_and_penalises_ignored_ones() -> None:
    update = get_policy("sage").apply_episode(_episode(), _stats(), PARAMS)
    z = 1 - 0.5 / 2.0
    assert update.terminal_score == pytest.approx(z)
    assert update.credits == pytest.approx({1: z / 2, 2: -0.2, 3: z / 2})
    # u <- (1 - eta) u + eta * credit, eta = max(1 / (1 + n_ret), 0.05)
    assert update.stats[1].utility == pytest.approx((2 / 3) * 0.1 + (1 / 3) * z / 2)
    assert update.stats[2].utility == pytest.approx(-0.2)
    assert update.stats[3].utility == pytest.approx(0.95 * 0.2 + 0.05 * z / 2)


def test_counters_and_access_follow_the_exposures() -> None:
    update = get_policy("sage").apply_episode(_episode(), _stats(), PARAMS)
    assert [update.stats[i].n_ret for i in (1, 2, 3)] == [3, 1, 41]
    assert [update.stats[i].n_ret_cold for i in (1, 2, 3)] == [1, 1, 0]
    assert [update.stats[i].n_ado for i in (1, 2, 3)] == [1, 0, 1]
    assert update.stats[1].adopting_ops == frozenset({"relu"})
    assert update.stats[2].adopting_ops == frozenset()
    assert update.stats[3].access == pytest.approx(0.9 * 0.5 + 0.1)  # resident and adopted this episode
    assert update.stats[1].access == 0.0  # cold items keep no EMA


def test_uniform_gives_every_shown_item_the_episode_reward() -> None:
    update = get_policy("uniform").apply_episode(_episode(), _stats(), PARAMS)
    assert update.credits == pytest.approx({1: 0.75, 2: 0.75, 3: 0.75})


def test_a_failed_episode_shares_minus_delta_among_adopted_items() -> None:
    update = get_policy("sage").apply_episode(_episode(t_first=None, t_best=None), _stats(), PARAMS)
    assert update.terminal_score == -0.2
    assert update.credits == pytest.approx({1: -0.1, 2: -0.2, 3: -0.1})


@pytest.mark.parametrize("name", ["static", "none"])
def test_frozen_policies_change_nothing(name: str) -> None:
    update = get_policy(name).apply_episode(_episode(), _stats(), PARAMS)
    assert update.stats == {}
    assert update.credits == {}


def test_value_memory_learns_stage_specific_values_from_round_outcomes() -> None:
    update = get_policy("value").apply_episode(_episode(), _stats(), PARAMS)
    # Round 1 (draft) was feasible: reward +1. Round 2 (refine) improved 2.0 -> 0.5: tanh(log 4).
    refine_reward = value.refine_reward(feasible=True, latency=0.5, best_so_far=2.0)
    assert update.stats[1].q_draft == pytest.approx(0.1)
    assert update.stats[3].q_draft == pytest.approx(0.1)
    assert update.stats[3].q_refine == pytest.approx(0.1 * refine_reward)
    assert update.stats[1].utility == 0.1  # value memory does not touch ATU utility
    assert update.credits[3] == pytest.approx((1 + refine_reward) / 2)


def test_refine_reward_is_bounded_and_punishes_infeasible_rounds() -> None:
    assert value.refine_reward(feasible=False, latency=1.0, best_so_far=1.0) == -1.0
    assert value.refine_reward(feasible=True, latency=1.0, best_so_far=1.0) == 0.0
    assert 0 < value.refine_reward(feasible=True, latency=0.1, best_so_far=1.0) < 1
    assert -1 < value.refine_reward(feasible=True, latency=10.0, best_so_far=1.0) < 0


def test_value_selection_prefers_high_q_within_the_similarity_shortlist() -> None:
    pool = [PoolEntry(item_id=i, relevance=1 - i / 100, q_draft=i / 10) for i in range(1, 11)]
    greedy = SageParams(value_epsilon=0.0, value_lambda=2)
    chosen = value.select_by_value(pool, 2, "draft", greedy, random.Random(0))
    assert [c.item_id for c in chosen] == [4, 3]  # best Q among the 4 most similar


def test_ranking_by_relevance_ignores_utility() -> None:
    pool = [PoolEntry(item_id=1, relevance=0.5, utility=0.9), PoolEntry(item_id=2, relevance=0.6, utility=-0.2)]
    ranked = get_policy("static").rank(pool, k=2, stage="draft", params=PARAMS, rng=random.Random(0))
    assert [c.item_id for c in ranked] == [2, 1]
    assert get_policy("none").rank(pool, k=2, stage="draft", params=PARAMS, rng=random.Random(0)) == []
    assert [c.item_id for c in get_policy("sage").rank(pool, k=2, stage="draft", params=PARAMS,
                                                       rng=random.Random(0))] == [1, 2]


def test_params_reject_values_outside_their_range() -> None:
    with pytest.raises(ConfigurationError, match="eta_min=0 would let utility freeze"):
        SageParams(eta_min=0.0)
    with pytest.raises(ConfigurationError, match="unknown SageParams field"):
        PARAMS.with_overrides(gama=0.1)

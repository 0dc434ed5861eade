"""The simulator end to end on the real database: invariants of a stream, and credit where the answer is
known by construction. The generator is the simulator's stochastic stand-in (no model)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernelsage.evals.simulator.dispatch import invariant_problems
from kernelsage.evals.simulator.measures import spearman, stream_measures
from kernelsage.evals.simulator.run import StreamSpec, run_stream
from kernelsage.evals.simulator.standin import StandInConfig
from kernelsage.evals.simulator.world import WorldConfig, build_world
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore

EPISODES = 100
SMALL_WORLD = WorldConfig(operators_per_level=4, categories=2, lessons=24)


def test_a_small_stream_keeps_the_memory_invariants(store: MemoryStore) -> None:
    # A small budget B and an easy gate so that hot memory fills up and its budget is really tested.
    params = SageParams(hot_budget_tokens=400, k_ado=2, k_op=2)
    spec = StreamSpec(policy="sage", order="mixed", seed=3, episodes=36, world=SMALL_WORLD, params=params,
                      checkpoints=36, keep_namespace=True, standin=StandInConfig(use_base=0.6))
    result = run_stream(store, spec)
    memory = store.open(result.records[0].namespace, create=False, embedding_dim=SMALL_WORLD.dim)
    try:
        assert invariant_problems(result) == []
        # exactly one commit per episode, each under its own id, as the store recorded them
        assert memory.stats()["episodes"] == spec.episodes == len({r.episode_id for r in result.records})
        assert all(r.memory.updated for r in result.records)
        assert memory.load_episode(result.records[-1].episode_id).operator == result.records[-1].task_id.split("#")[0]
        # utilities stay within the bounds of the credits: [-max(delta, beta), 1]
        utilities = [item.utility for item in memory.list_items(limit=10_000)]
        assert min(utilities) >= -0.2 - 1e-9 and max(utilities) <= 1.0
        assert min(utilities) < 0 < max(utilities)  # credit was really applied, both ways
        # hot memory was used, and never over its budget
        assert max(p.helpful + p.neutral + p.harmful for p in result.hot_timeline) > 0
        assert all(p.tokens <= params.hot_budget_tokens for p in result.hot_timeline)
        # the maximum is taken after every consolidation, so it covers the checkpoints' figures
        assert max(p.tokens for p in result.hot_timeline) <= result.max_hot_tokens <= params.hot_budget_tokens
        assert sum(h.resident_tokens for h in memory.hot_rules()) <= params.hot_budget_tokens
        assert result.truth.items == memory.count_items() > 24  # successes added experiences
    finally:
        store.delete_namespace(memory.name)
    measures = stream_measures(result)
    assert 0.0 <= measures["er"] <= 1.0 and measures["credit_accuracy"] is not None


def _two_item_stream(store: MemoryStore, policy: str) -> tuple[float, float, int, int]:
    """A world of two draft lessons, a helpful one (value 0.4-1.0 for every operator) and a useless one
    (0 everywhere), one item each, both shown in every episode (top_k = 2, no new experiences). The
    stand-in uses each with the same chance whatever its value (discernment 0) and declares exactly what it
    used; without the helpful item a kernel is almost never correct."""
    world = WorldConfig(operators_per_level=2, categories=1, lessons=2, draft_share=1.0,
                        kind_shares={"category": 0.5, "useless": 0.5})
    standin = StandInConfig(use_base=0.5, discernment=0.0, false_claim=0.0, silent_use=0.0, effect=10.0,
                            correct_logit=(-6.0, -6.0, -6.0))
    # eta_min small: utility is the plain mean of the credits over the whole stream, not a recent average
    spec = StreamSpec(policy=policy, order="mixed", seed=11, episodes=EPISODES, world=world, standin=standin,
                      params=SageParams(top_k=2, eta_min=0.01), new_experiences=False)
    built = build_world(world, spec.seed)
    helpful = next(ls.index for ls in built.lessons if ls.kind == "category")
    useless = 1 - helpful
    assert np.all(built.values[helpful] >= 0.4) and np.all(built.values[useless] == 0.0)  # by construction
    result = run_stream(store, spec)
    items = {result.truth.lesson_of[i]: i for i in result.learned}
    exposures = (result.truth.exposures[items[helpful]], result.truth.exposures[items[useless]])
    return result.learned[items[helpful]], result.learned[items[useless]], *exposures


def test_atu_ranks_a_helpful_item_above_a_useless_one_and_uniform_credit_does_not(store: MemoryStore) -> None:
    atu_helpful, atu_useless, shown_h, shown_u = _two_item_stream(store, "atu-only")
    assert shown_h == shown_u == EPISODES  # shown equally often
    assert atu_helpful > atu_useless + 0.03
    uniform_helpful, uniform_useless, shown_h, shown_u = _two_item_stream(store, "uniform")
    assert shown_h == shown_u == EPISODES
    assert uniform_helpful == pytest.approx(uniform_useless, abs=1e-12)  # same credit every episode: no ranking


def test_rank_correlation_handles_ties_and_constant_input() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 2], [1, 2, 3, 4]) == pytest.approx(0.8944, abs=1e-4)
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1, 2], [1, 2]) is None


def test_intervals_need_two_seeds_and_narrow_smoothly_with_more() -> None:
    from kernelsage.evals.simulator.measures import interval, t95

    one = interval([0.4, None])
    assert one["mean"] == 0.4 and one["low"] is None and one["high"] is None and one["n"] == 1
    quantiles = [t95(df) for df in range(1, 200)]
    assert all(a > b for a, b in itertools.pairwise(quantiles))  # no jump past the table's 30
    assert abs(t95(40) - 2.021) < 1e-3 and abs(t95(120) - 1.980) < 1e-3 and t95(10_000) > 1.959964
    two = interval([0.2, 0.4], bounds=(0.0, 1.0))
    assert two["low"] == 0.0 and two["high"] == 1.0  # 12.7 x the spread: clipped to a share's bounds

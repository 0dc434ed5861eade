"""UGC's published properties (METHOD §5)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelsage.memory_backend import ugc
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import ItemStats

PARAMS = SageParams()

candidates = st.lists(
    st.builds(
        ugc.HotCandidate,
        item_id=st.integers(min_value=1, max_value=10**6),
        utility=st.floats(min_value=-0.2, max_value=0.999),
        access=st.floats(min_value=0.0, max_value=1.0),
        tokens=st.integers(min_value=1, max_value=4000),
    ),
    max_size=60,
    unique_by=lambda c: c.item_id,
)


def test_gate_needs_positive_utility_and_three_adoptions_on_three_operators() -> None:
    ready = ItemStats(item_id=1, utility=0.1, n_ado=3, adopting_ops=frozenset({"a", "b", "c"}))
    assert ugc.is_validated(ready, PARAMS)
    assert not ugc.is_validated(ready._replace(utility=0.0), PARAMS)
    assert not ugc.is_validated(ready._replace(n_ado=2), PARAMS)
    assert not ugc.is_validated(ready._replace(adopting_ops=frozenset({"a", "b"})), PARAMS)


def test_priority_is_utility_times_access_over_length() -> None:
    assert ugc.priority(0.5, 0.4, 10) == pytest.approx(0.02)


@given(candidates)
def test_column_priorities_are_the_scalar_priorities(pool) -> None:
    """The priorities consolidation records with each hot event, computed over its columns, equal `priority`."""
    columns = ugc.priority_columns(np.array([c.utility for c in pool], dtype=np.float64),
                                   np.array([c.access for c in pool], dtype=np.float64),
                                   np.array([c.tokens for c in pool], dtype=np.int64))
    assert columns.tolist() == [ugc.priority(c.utility, c.access, c.tokens) for c in pool]


@given(candidates, st.integers(min_value=1, max_value=20_000))
def test_greedy_selection_never_exceeds_the_budget(pool, budget: int) -> None:
    chosen = ugc.select_hot(pool, budget)
    tokens = {c.item_id: c.tokens for c in pool}
    assert sum(tokens[i] for i in chosen) <= budget
    assert len(set(chosen)) == len(chosen)


@given(candidates, st.integers(min_value=1, max_value=20_000))
def test_greedy_selection_skips_only_what_does_not_fit(pool, budget: int) -> None:
    chosen = set(ugc.select_hot(pool, budget))
    used = sum(c.tokens for c in pool if c.item_id in chosen)
    for c in pool:
        if c.item_id not in chosen and ugc.priority(c.utility, c.access, c.tokens) > 0:
            assert used + c.tokens > budget  # it was skipped because it could not fit


def test_greedy_selection_skips_a_big_rule_and_keeps_scanning() -> None:
    pool = [
        ugc.HotCandidate(item_id=1, utility=0.9, access=1.0, tokens=60),  # priority 0.015
        ugc.HotCandidate(item_id=2, utility=0.9, access=1.0, tokens=80),  # 0.01125: never fits after 1 and 3
        ugc.HotCandidate(item_id=3, utility=0.5, access=1.0, tokens=40),  # 0.0125
        ugc.HotCandidate(item_id=4, utility=0.1, access=1.0, tokens=30),  # 0.0033: fits once 2 is skipped
    ]
    assert ugc.select_hot(pool, budget=100) == [1, 3]
    assert ugc.select_hot(pool, budget=130) == [1, 3, 4]


def test_rules_without_positive_priority_never_become_resident() -> None:
    pool = [ugc.HotCandidate(item_id=1, utility=-0.1, access=1.0, tokens=5),
            ugc.HotCandidate(item_id=2, utility=0.3, access=0.0, tokens=5)]
    assert ugc.select_hot(pool, budget=100) == []


@given(candidates, st.integers(min_value=1, max_value=20_000), st.integers())
def test_random_selection_respects_the_budget_too(pool, budget: int, seed: int) -> None:
    chosen = ugc.select_random(pool, budget, random.Random(seed))
    assert sum(c.tokens for c in pool if c.item_id in chosen) <= budget


def test_an_unused_residents_priority_halves_in_about_6_6_updates_against_a_used_one() -> None:
    used = unused = 1.0
    updates = 0
    while ugc.priority(0.5, unused, 10) > 0.5 * ugc.priority(0.5, used, 10):
        used = ugc.update_access(used, True, PARAMS)
        unused = ugc.update_access(unused, False, PARAMS)
        updates += 1
    assert updates == 7  # 0.9^6 = 0.53, 0.9^7 = 0.48: the half-life is 6.6 updates
    assert math.log(0.5) / math.log(1 - PARAMS.mu) == pytest.approx(6.58, abs=0.01)


@given(st.floats(min_value=0, max_value=1), st.lists(st.booleans(), max_size=100))
def test_access_estimate_stays_a_probability(access: float, adoptions: list[bool]) -> None:
    for adopted in adoptions:
        access = ugc.update_access(access, adopted, PARAMS)
        assert 0.0 <= access <= 1.0


def test_cold_access_estimate_is_retrievals_over_eligible_episodes() -> None:
    assert ugc.cold_access_estimate(3, 12) == 0.25
    assert ugc.cold_access_estimate(0, 0) == 0.0


def test_displaced_rules_are_demoted_and_newcomers_promoted() -> None:
    plan = ugc.plan_consolidation(current_hot=[1, 2], selected=[2, 3], tokens={1: 5, 2: 7, 3: 11})
    assert plan.promoted == (3,)
    assert plan.demoted == (1,)
    assert plan.hot == (2, 3)
    assert plan.tokens_used == 18


@given(st.lists(st.tuples(st.sampled_from([-0.1, 0.0, 1e-9, 0.3]), st.integers(0, 6), st.integers(0, 5)),
                max_size=40))
def test_the_column_gate_is_the_scalar_gate(rows) -> None:
    """Consolidation settles the gate over columns; it must agree with `is_validated` item by item."""
    stats = [ItemStats(item_id=i, utility=u, n_ado=n, adopting_ops=frozenset(f"op{k}" for k in range(ops)))
             for i, (u, n, ops) in enumerate(rows)]
    columns = [np.array([r[k] for r in rows], dtype=t) for k, t in enumerate((np.float64, np.int64, np.int64))]
    assert ugc.passes_gate(*columns, PARAMS).tolist() == [ugc.is_validated(s, PARAMS) for s in stats]


@given(st.lists(st.tuples(st.floats(-0.2, 1.0), st.floats(0.0, 1.0), st.integers(1, 400),
                          st.integers(0, 50), st.integers(0, 60)), max_size=60),
       st.integers(1, 3000))
def test_column_selection_and_estimates_match_the_scalar_formulas(rows, budget) -> None:
    """The numpy paths consolidation uses choose exactly what the per-item formulas choose."""
    pool = [ugc.HotCandidate(item_id=i, utility=u, access=ugc.cold_access_estimate(r, e), tokens=t)
            for i, (u, _, t, r, e) in enumerate(rows)]
    estimates = ugc.cold_access_estimates(np.array([r for *_, r, _ in rows], dtype=np.float64),
                                          np.array([e for *_, e in rows], dtype=np.float64))
    assert estimates.tolist() == [c.access for c in pool]
    ranked = sorted((c for c in pool if ugc.priority(c.utility, c.access, c.tokens) > 0),
                    key=lambda c: (-ugc.priority(c.utility, c.access, c.tokens), c.tokens, c.item_id))
    chosen, used = [], 0
    for c in ranked:  # the greedy scan, written out per item
        if used + c.tokens <= budget:
            chosen.append(c.item_id)
            used += c.tokens
    assert ugc.select_hot(pool, budget) == chosen

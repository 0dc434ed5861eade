"""UGC through the store: the gate, abstraction, promotion under budget, displacement."""

from __future__ import annotations

import pytest

from kernelsage.memory_backend.items import MemoryItem, NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors


def test_an_item_adopted_on_three_operators_is_validated_abstracted_and_promoted(
    store: MemoryStore, namespace: str
) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(3))
    abstracted: list[int] = []

    def abstract(item: MemoryItem) -> str:
        abstracted.append(item.id)
        return "Rule: unroll inner loops by 4 when the row length is a multiple of 4."

    for n, operator in enumerate(["relu", "gelu"]):
        commit(memory, episode(f"e{n}", operator, ids[:2], ids[:1]))
        assert memory.consolidate(abstract_rule=abstract).promoted == ()  # K_op = 3 not reached yet
    assert memory.get_item(ids[0]).state == "cold"
    commit(memory, episode("e2", "relu", ids[:2], ids[:1]))  # a third adoption, same operator
    assert memory.consolidate(abstract_rule=abstract).validated == 0

    commit(memory, episode("e3", "softmax", ids[:2], ids[:1]))
    result = memory.consolidate(abstract_rule=abstract)
    assert result.validated == 1 and result.abstracted == 1 and abstracted == [ids[0]]
    assert result.promoted == (ids[0],) and result.hot == (ids[0],)
    rule = memory.get_item(ids[0])
    assert rule.state == "hot" and rule.rule_text.startswith("Rule:") and rule.text.startswith("experience 0")
    assert rule.access == pytest.approx(1.0)  # retrieved in all 4 episodes it could have been
    assert rule.promoted_at is not None and memory.get_item(ids[1]).state == "cold"
    assert result.tokens_used == rule.rule_tokens <= result.budget


def test_a_displaced_rule_returns_to_validated_and_to_cold_retrieval(store: MemoryStore, namespace: str) -> None:
    params = SageParams(k_ado=1, k_op=1, hot_budget_tokens=30, pool_size=10, top_k=10)
    memory = MemoryStore(store.pool, params=params, token_counter=lambda text: 20).open(
        namespace, embedding_dim=16)
    vectors = unit_vectors(3)
    ids = seed_items(memory, vectors)
    commit(memory, episode("e1", "relu", ids[:1], ids[:1], t_first=2.0, t_best=1.8))  # z = 0.1
    assert memory.consolidate().hot == (ids[0],)
    # The second item earns a higher utility; only one 20-token rule fits in 30 tokens.
    commit(memory, episode("e2", "gelu", ids[:2], ids[1:2], t_first=2.0, t_best=0.4, hot=ids[:1]))
    result = memory.consolidate()
    assert result.promoted == (ids[1],) and result.demoted == (ids[0],) and result.hot_version == 2
    displaced = memory.get_item(ids[0])
    assert displaced.state == "validated" and displaced.demoted_at is not None
    assert displaced.access == pytest.approx(0.9)  # the resident EMA after one unused episode
    cold_ids = {s.item.id for s in memory.retrieve(vectors[0]).cold}
    assert ids[0] in cold_ids and ids[1] not in cold_ids


def test_a_validated_item_that_loses_its_utility_returns_to_cold(store: MemoryStore, namespace: str) -> None:
    params = SageParams(k_ado=1, k_op=1, hot_budget_tokens=10)  # no 20-token rule fits: it stays validated
    memory = MemoryStore(store.pool, params=params, token_counter=lambda text: 20).open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(2))
    commit(memory, episode("e1", "relu", ids, ids[:1]))
    assert memory.consolidate().validated == 1 and memory.get_item(ids[0]).state == "validated"
    for n in range(2, 5):  # adopted in failed episodes: its utility turns negative
        commit(memory, episode(f"e{n}", "relu", ids, ids[:1], t_first=None, t_best=None))
    assert memory.get_item(ids[0]).utility < 0
    assert memory.consolidate().validated == 0
    assert [memory.get_item(i).state for i in ids] == ["cold", "cold"]


def test_random_consolidation_fills_the_same_budget_in_another_order(store: MemoryStore, namespace: str) -> None:
    params = SageParams(k_ado=1, k_op=1, hot_budget_tokens=45)
    memory = MemoryStore(store.pool, params=params, token_counter=lambda text: 20).open(
        namespace, embedding_dim=16, policy="random-ugc")
    ids = seed_items(memory, unit_vectors(6))
    commit(memory, episode("e1", "relu", ids, ids))  # six equal items: priority would take ids 0, 1
    hot_sets = set()
    for seed in range(8):
        result = memory.consolidate(seed=seed)
        assert len(result.hot) == 2 and result.tokens_used == 40
        hot_sets.add(result.hot)
    assert len(hot_sets) > 1 and hot_sets != {tuple(ids[:2])}


def test_policies_without_hot_memory_never_consolidate(store: MemoryStore, namespace: str) -> None:
    params = SageParams(k_ado=1, k_op=1)
    memory = MemoryStore(store.pool, params=params).open(namespace, embedding_dim=16, policy="atu-only")
    ids = seed_items(memory, unit_vectors(2))
    commit(memory, episode("e1", "relu", ids, ids))
    result = memory.consolidate()
    assert result.hot == () and result.promoted == ()
    assert {memory.get_item(i).state for i in ids} == {"cold"}


def test_consolidation_uses_the_pluggable_token_counter(store: MemoryStore, namespace: str) -> None:
    counted: list[str] = []

    def counter(text: str) -> int:
        counted.append(text)
        return 7

    params = SageParams(k_ado=1, k_op=1)
    memory = MemoryStore(store.pool, params=params, token_counter=counter).open(namespace, embedding_dim=16)
    [item_id] = memory.add_items([NewItem(text="vectorise the tail", embedding=unit_vectors(1)[0].tolist())])
    commit(memory, episode("e1", "relu", [item_id], [item_id]))
    memory.consolidate(abstract_rule=lambda item: "Rule: vectorise tails")
    assert counted == ["vectorise the tail", "Rule: vectorise tails"]
    assert memory.get_item(item_id).resident_tokens == 7

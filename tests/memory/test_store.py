"""The PostgreSQL store on a real embedded server: namespaces, retrieval, the episode commit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from psycopg import sql

from kernelsage.errors import EmbeddingDimensionError, EpisodeError, NamespaceError, ReadOnlyMemoryError
from kernelsage.memory_backend import migrations, vector_index
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, ItemStats, RoundOutcome
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors


def test_migrations_are_recorded_and_safe_to_run_twice(store: MemoryStore) -> None:
    assert store.migrate() == []
    again = MemoryStore(store.pool)  # a second opener on a migrated database
    assert again.applied_migrations() == store.applied_migrations() == [v for v, _, _ in migrations.MIGRATIONS]


def test_a_namespace_never_sees_another_namespaces_items(store: MemoryStore, namespace: str) -> None:
    vectors = unit_vectors(30)
    mine = store.open(namespace, embedding_dim=16)
    theirs = store.open(namespace + "-other", embedding_dim=16)
    my_ids = set(seed_items(mine, vectors))
    their_ids = set(seed_items(theirs, vectors))  # the very same vectors
    for query in vectors[:5]:
        found = {s.item.id for s in mine.retrieve(query, k=20).cold}
        assert found <= my_ids and len(found) == 20
    with pytest.raises(NamespaceError, match="has no item"):
        mine.get_item(min(their_ids))
    with pytest.raises(EpisodeError, match="holds no items"):
        commit(mine, episode("e1", "relu", [min(their_ids)], []))
    assert all(i.id in my_ids for i in mine.list_items(limit=100))


def test_the_embedding_dimension_is_fixed_per_namespace(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    with pytest.raises(EmbeddingDimensionError, match="stores 16-dimensional"):
        store.open(namespace, embedding_dim=8)
    with pytest.raises(EmbeddingDimensionError, match="dimension 8"):
        memory.add_items([NewItem(text="x", embedding=[0.1] * 8)])
    with pytest.raises(EmbeddingDimensionError, match="query embedding has dimension 3"):
        memory.retrieve([1.0, 0.0, 0.0])
    with pytest.raises(EmbeddingDimensionError, match="NaN"):
        memory.add_items([NewItem(text="x", embedding=[float("nan")] * 16)])
    assert memory.stats()["items"] == 0  # nothing half-written


def test_retrieval_is_a_relevance_pool_reranked_late_by_utility(store: MemoryStore, namespace: str) -> None:
    params = SageParams(pool_size=5, top_k=2)
    memory = MemoryStore(store.pool, params=params).open(namespace, embedding_dim=3)
    ids = memory.add_items([
        NewItem(text="nearest", embedding=[1.0, 0.0, 0.0]),
        NewItem(text="close but useful", embedding=[0.97, 0.243, 0.0]),
        NewItem(text="far", embedding=[0.0, 0.0, 1.0]),
    ])
    first = memory.retrieve([1.0, 0.0, 0.0])
    assert [s.item.id for s in first.cold] == ids[:2]
    assert first.cold[0].relevance == pytest.approx(1.0, abs=1e-5)
    # Give the second item utility: 0.3 * u must overcome the 0.03 relevance gap.
    commit(memory, episode("e1", "relu", ids[:2], [ids[1]], t_first=2.0, t_best=1.0))
    reranked = memory.retrieve([1.0, 0.0, 0.0])
    assert [s.item.id for s in reranked.cold] == [ids[1], ids[0]]
    assert reranked.cold[0].score == pytest.approx(reranked.cold[0].relevance + 0.3 * 0.5, abs=1e-6)


def test_commit_applies_the_formulas_and_is_idempotent(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(4))
    result = commit(memory, episode("e1", "relu", ids[:3], ids[:2], t_first=4.0, t_best=1.0))
    assert result.applied and result.terminal_score == pytest.approx(0.75)
    assert result.credits == pytest.approx({ids[0]: 0.375, ids[1]: 0.375, ids[2]: -0.2})
    before = [memory.get_item(i) for i in ids]
    assert [i.n_ret for i in before] == [1, 1, 1, 0]
    assert [i.utility for i in before[:3]] == pytest.approx([0.375, 0.375, -0.2])  # eta = 1 on the first update

    again = commit(memory, episode("e1", "relu", ids[:3], ids[:2], t_first=4.0, t_best=1.0))
    assert not again.applied
    assert again.credits == pytest.approx(result.credits)
    assert [memory.get_item(i) for i in ids] == before
    audit = memory.episode_credits("e1")
    assert audit[ids[2]] == pytest.approx((-0.2, 0.0, -0.2))
    assert result.stored_credits == audit and again.stored_credits == audit  # exactly what the audit reads back
    assert memory.stats()["episodes"] == 1


def test_an_unresolved_episode_writes_nothing(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(2))
    unresolved = EpisodeTrace(episode_id="e1", operator="relu", exposures=(
        Exposure(item_id=ids[0], round=1, tier="cold", adopted=True),
        Exposure(item_id=ids[1], round=1, tier="cold", adopted=None),
    ))
    with pytest.raises(EpisodeError, match="no adoption state"):
        commit(memory, unresolved)
    assert memory.stats()["episodes"] == 0
    assert memory.get_item(ids[0]).n_ret == 0


def test_read_only_memory_refuses_every_update(store: MemoryStore, namespace: str) -> None:
    writable = store.open(namespace, embedding_dim=16)
    ids = seed_items(writable, unit_vectors(3))
    frozen = store.open(namespace, read_only=True)
    assert len(frozen.retrieve(unit_vectors(1)[0], k=2).cold) == 2
    for update in (
        lambda: frozen.add_items([NewItem(text="x", embedding=[0.0] * 16)]),
        lambda: commit(frozen, episode("e1", "relu", ids, ids)),
        lambda: frozen.consolidate(),
    ):
        with pytest.raises(ReadOnlyMemoryError, match="open read-only"):
            update()
    assert writable.stats()["episodes"] == 0
    with pytest.raises(NamespaceError, match="does not exist"):
        store.open(namespace + "-missing", read_only=True)


def test_an_unknown_namespace_is_refused_without_naming_the_others(store: MemoryStore, namespace: str) -> None:
    store.open(namespace + "-other-team", embedding_dim=16)  # a shared database holds other teams' namespaces
    with pytest.raises(NamespaceError) as refused:
        store.open(namespace + "-missing", create=False)
    message = str(refused.value)
    assert f"namespace {namespace + '-missing'!r} does not exist" in message
    assert "kernelsage memory namespaces" in message and "other-team" not in message


def test_hot_rules_are_resident_and_never_retrieved_from_cold(store: MemoryStore, namespace: str) -> None:
    params = SageParams(k_ado=1, k_op=1, pool_size=10, top_k=10)
    memory = MemoryStore(store.pool, params=params).open(namespace, embedding_dim=16)
    vectors = unit_vectors(10)
    ids = seed_items(memory, vectors)
    commit(memory, episode("e1", "relu", ids[:2], [ids[0]]))
    result = memory.consolidate()
    assert result.promoted == (ids[0],)
    retrieval = memory.retrieve(vectors[0])
    assert [s.item.id for s in retrieval.hot] == [ids[0]]
    assert ids[0] not in {s.item.id for s in retrieval.cold}
    assert len(retrieval.cold) == 9  # the filter did not shrink the pool below what exists
    assert retrieval.hot_version == result.hot_version == 1
    # A policy without hot memory searches everything and shows no resident rules.
    plain = MemoryStore(store.pool, params=params).open(namespace, policy="atu-only")
    assert ids[0] in {s.item.id for s in plain.retrieve(vectors[0]).cold}
    assert plain.retrieve(vectors[0]).hot == []


def test_filtered_search_does_not_under_return(store: MemoryStore, namespace: str) -> None:
    params = SageParams(pool_size=40, top_k=40, probes=1)
    memory = MemoryStore(store.pool, params=params).open(namespace, embedding_dim=16)
    vectors = unit_vectors(vector_index.EXACT_BELOW + 1000, seed=3)
    ids = np.array(seed_items(memory, vectors))  # past EXACT_BELOW: the store gives it an IVF index
    memory.store.index_builds.wait()
    lists = vector_index.lists_for(len(ids))
    query = vectors[0]
    order = np.argsort(-(vectors @ query))
    hot = ids[order[:1000]]  # the thousand nearest items are resident: one probe must read further lists
    with store.pool.connection() as conn:  # test set-up: make them hot without a thousand episodes
        conn.execute("UPDATE ks_items SET state = 'hot' WHERE id = ANY(%s)", (hot.tolist(),))
        conn.execute("ANALYZE ks_item_vectors")
        conn.execute("ANALYZE ks_items")
        plan = conn.execute(sql.SQL("EXPLAIN ") + q.nearest_items(memory.info.id, 16, exclude_resident=True),
                            {"q": query, "n": 40}).fetchall()
    # The search the store runs: the namespace's index read in distance order, each row's item joined by its
    # primary key (the state filter), so the scan streams and iterative scans read further lists.
    text = "\n".join(row["QUERY PLAN"] for row in plan)
    assert f"Index Scan using ks_item_vectors_ivf_ns{memory.info.id}_l{lists}" in text, text
    assert "ks_items_pkey" in text and "Sort" not in text, text
    found = [s.item.id for s in memory.retrieve(query).cold]
    assert len(found) == 40
    assert not set(found) & set(hot.tolist())
    near = {int(i): rank for rank, i in enumerate(ids[order])}
    assert max(near[i] for i in found) < 3000  # approximate, but all from the nearer half


def test_item_provenance_and_history_are_kept(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    [item_id] = memory.add_items([NewItem(
        text="Use a two-pass max-subtract softmax", evidence="NaN at row 3 without it",
        code_example="m = max(x); y = exp(x - m)", operator="softmax", source_episode="ep-7",
        metadata={"backend": "cpu"}, embedding=unit_vectors(1)[0].tolist(),
    )])
    item = memory.get_item(item_id)
    assert (item.evidence, item.operator, item.source_episode) == ("NaN at row 3 without it", "softmax", "ep-7")
    assert item.metadata == {"backend": "cpu"} and item.state == "cold" and item.tokens >= 8


def test_a_stored_episode_replays_to_the_credits_it_applied(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(4))
    commit(memory, episode("e1", "relu", ids[:3], ids[:1], t_first=3.0, t_best=1.0))
    recorded = EpisodeTrace(
        episode_id="e2", operator="gelu", level=2, t_first=5.0, t_best=2.0, hot_version_seen=0,
        exposures=(Exposure(item_id=ids[0], round=1, tier="cold", relevance=0.8, score=0.9, adopted=False,
                            rationale="tried, did not help"),
                   Exposure(item_id=ids[3], round=2, tier="cold", stage="refine", adopted=True, rationale="tiling")),
        rounds=(RoundOutcome(round=1, stage="draft", compiled=True, correct=True, latency=5.0),
                RoundOutcome(round=2, stage="refine", compiled=True, correct=True, latency=2.0)),
        metadata={"model": "scripted"},
    )
    committed = commit(memory, recorded)
    loaded = memory.load_episode("e2")
    assert loaded == replace(recorded, policy="sage")
    # The audit: replaying the stored record from the stored "before" statistics gives the stored credits.
    stored = memory.episode_credits("e2")
    assert committed.stored_credits == stored
    before = {i: ItemStats(item_id=i, utility=stored[i][1], n_ret=1 if i == ids[0] else 0) for i in stored}
    replayed = memory.policy.apply_episode(loaded, before, memory.params)
    assert replayed.credits == pytest.approx({i: c for i, (c, _, _) in stored.items()})
    assert {i: s.utility for i, s in replayed.stats.items()} == pytest.approx({i: a for i, (_, _, a) in stored.items()})


def test_experiences_stored_with_an_episode_arrive_exactly_once(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(2))
    lesson = NewItem(text="Accumulate softmax sums in float64 for long rows", evidence="rel error 3e-3 at 65536",
                     operator="softmax", embedding=unit_vectors(1, seed=9)[0].tolist())
    first = commit(memory, episode("e1", "softmax", ids, ids[:1]), new_items=[lesson])
    again = commit(memory, episode("e1", "softmax", ids, ids[:1]), new_items=[lesson])
    assert first.applied and not again.applied
    assert again.new_item_ids == first.new_item_ids and len(first.new_item_ids) == 1
    stored = memory.get_item(first.new_item_ids[0])
    assert stored.source_episode == "e1" and stored.state == "cold" and stored.n_ret == 0
    assert memory.stats()["items"] == 3

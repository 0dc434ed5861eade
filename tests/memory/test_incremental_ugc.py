"""Consolidation reads its candidates incrementally (candidates.py) and selects exactly what a full read
selects: checked column for column against the full read, and by a store without a cache, which must
find nothing to change, after every consolidation of a churning namespace."""

from __future__ import annotations

import contextlib
import random

import numpy as np

from kernelsage.memory_backend import candidates, item_rows, retrieval
from kernelsage.memory_backend.items import MemoryItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure
from kernelsage.memory_backend.store import Memory, MemoryStore
from tests.memory.helpers import seed_items, unit_vectors

CHURN = SageParams(k_ado=2, k_op=2, hot_budget_tokens=120, pool_size=12, top_k=8)
FIELDS = ("ids", "utility", "n_ado", "distinct_ops", "access", "n_ret_cold", "eligible_episodes", "tokens", "hot",
          "validated", "has_rule")


def _mismatches(store: MemoryStore, memory: Memory) -> int:
    """Values in which the candidates the next consolidation would read (the store's cache with the rows
    changed since read again) differ from a full read at the same episode."""
    cache = store.candidate_caches.get(memory.info.id)
    with store.pool.connection() as conn:
        seq = conn.execute("SELECT episode_seq FROM ks_namespaces WHERE id = %s", (memory.info.id,)).fetchone()
        full = item_rows.fetch_gate_candidates(conn, seq["episode_seq"], memory.info.id, CHURN.k_ado)
        cached = candidates.read(conn, memory.info.id, seq["episode_seq"], CHURN.k_ado, cache).at(seq["episode_seq"])
    order = np.argsort(full.ids)
    if len(cached.ids) != len(full.ids):
        return abs(len(cached.ids) - len(full.ids))
    return sum(int((getattr(cached, f) != getattr(full, f)[order]).sum()) for f in FIELDS)


def _residency_disagreements(store: MemoryStore, memory: Memory, vectors: np.ndarray) -> int:
    """Items on which the hot set (state 'hot'), the last hot event of each item, and the vector search's
    resident filter disagree: residency is kept on the item alone, and a swap writes states and events."""
    with store.pool.connection() as conn:
        hot = {r["id"] for r in conn.execute("SELECT id FROM ks_items WHERE namespace_id = %s AND state = 'hot'",
                                             (memory.info.id,))}
        every = {r["id"] for r in conn.execute("SELECT id FROM ks_items WHERE namespace_id = %s", (memory.info.id,))}
        last = {r["item_id"] for r in conn.execute(
            "SELECT DISTINCT ON (item_id) item_id, event FROM ks_hot_events WHERE namespace_id = %s "
            "ORDER BY item_id, hot_version DESC", (memory.info.id,)) if r["event"] == "promoted"}
        searched = {item.id for item, _ in retrieval.relevance_pool(conn, memory.info, vectors[0], len(every),
                                                                    exclude_resident=True, probes=0)}
    return len(hot ^ last) + len((every - hot) ^ searched)


def _episode(memory: Memory, rng: random.Random, name: str, vectors: np.ndarray) -> None:
    shown = memory.retrieve(vectors[rng.randrange(len(vectors))], episode_id=name, round=1).shown
    solved = rng.random() < 0.7
    memory.commit_episode(EpisodeTrace(
        episode_id=name, operator=f"op{rng.randrange(5)}", t_first=2.0 if solved else None,
        t_best=rng.uniform(0.4, 2.0) if solved else None,
        exposures=tuple(Exposure(item_id=s.item.id, round=1, tier=s.tier, adopted=rng.random() < 0.5)
                        for s in shown)))


def test_incremental_consolidation_selects_exactly_what_a_full_read_selects(store: MemoryStore,
                                                                              namespace: str) -> None:
    cached_store = MemoryStore(store.pool, params=CHURN, token_counter=lambda text: 10 + len(text) % 17)
    memory = cached_store.open(namespace, embedding_dim=16)
    vectors = unit_vectors(80, seed=21)
    seed_items(memory, vectors)
    rng = random.Random(23)

    def abstract(item: MemoryItem) -> str:
        return f"Rule {item.id}: " + "keep it short " * rng.randrange(1, 4)

    mismatches, changes, reads = 0, 0, 0
    for n in range(60):
        for k in range(rng.randrange(0, 3)):  # zero to two episodes between consolidations
            _episode(memory, rng, f"e{n}-{k}", vectors)
        if n % 11 == 5:  # another process consolidates: this store's cache is stale and read again
            other = MemoryStore(store.pool, params=CHURN, token_counter=lambda text: 10 + len(text) % 17)
            other.open(namespace).consolidate(abstract_rule=abstract)
        result = memory.consolidate(abstract_rule=abstract)
        changes += len(result.promoted) + len(result.demoted)
        assert cached_store.candidate_caches.get(memory.info.id) is not None
        mismatches += _mismatches(cached_store, memory) + _residency_disagreements(cached_store, memory, vectors)
        fresh = MemoryStore(store.pool, params=CHURN, token_counter=lambda text: 10 + len(text) % 17)
        check = fresh.open(namespace).consolidate(abstract_rule=abstract)  # a full read finds nothing to do
        assert (check.promoted, check.demoted, check.hot) == ((), (), result.hot), f"consolidation {n}"
        reads += 1
        _episode(memory, rng, f"x{n}", vectors)  # and after a commit, which the next read must take in
        mismatches += _mismatches(cached_store, memory)
    assert mismatches == 0
    assert changes > 20 and reads == 60  # the hot set really churned


def test_a_consolidation_rolled_back_leaves_no_cache(store: MemoryStore, namespace: str) -> None:
    """A pass whose transaction fails is not cached: the next consolidation reads everything again."""
    cached_store = MemoryStore(store.pool, params=CHURN)
    memory = cached_store.open(namespace, embedding_dim=16)
    seed_items(memory, unit_vectors(10, seed=3))

    def fails(item: MemoryItem) -> str:
        raise RuntimeError("the model is down")

    rng = random.Random(5)
    for n in range(4):
        _episode(memory, rng, f"e{n}", unit_vectors(10, seed=3))
    with contextlib.suppress(RuntimeError):  # raised only when an item passed the gate and needs a rule
        memory.consolidate(abstract_rule=fails)
    cache = cached_store.candidate_caches.get(memory.info.id)
    # The first pass committed (its gate settled), so its cache stands; the second never ran.
    assert cache is None or _mismatches(cached_store, memory) == 0
    memory.consolidate()
    assert _mismatches(cached_store, memory) == 0

"""The namespace's vector index: exact search while small, an IVFFlat index whose lists grow with the data."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernelsage.memory_backend import vector_index
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import seed_items, unit_vectors


@given(st.integers(min_value=0, max_value=5_000_000))
def test_lists_grow_with_the_data_within_bounds(rows: int) -> None:
    lists = vector_index.lists_for(rows)
    assert lists == 1 if rows < vector_index.EXACT_BELOW else 2 <= lists <= vector_index.MAX_LISTS
    assert vector_index.lists_for(rows + 1) >= lists


@given(st.integers(min_value=0, max_value=5_000_000), st.integers(min_value=0, max_value=5_000_000))
def test_rebuilds_happen_at_growing_sizes(built_for: int, rows: int) -> None:
    current = vector_index.lists_for(built_for)
    wanted = vector_index.lists_for(rows)
    rebuild = vector_index.needs_rebuild(current, rows)
    assert vector_index.needs_rebuild(None, rows)
    if current == 1:
        assert rebuild == (wanted > 1)
    else:
        assert rebuild == (wanted >= vector_index.GROWTH * current)  # never for shrinking or slight growth


def index_names(store: MemoryStore, namespace_id: int) -> list[str]:
    with store.pool.connection() as conn:
        rows = conn.execute("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                            "WHERE starts_with(c.relname, %s) ORDER BY 1",
                            (f"ks_item_vectors_ivf_ns{namespace_id}_l",)).fetchall()
    return [r["relname"] for r in rows]


def test_small_namespaces_are_searched_exactly_and_large_ones_get_lists(store: MemoryStore, namespace: str) -> None:
    memory = MemoryStore(store.pool, params=SageParams(probes=1)).open(namespace, embedding_dim=16)
    assert index_names(store, memory.info.id) == [f"ks_item_vectors_ivf_ns{memory.info.id}_l1"]
    vectors = unit_vectors(vector_index.EXACT_BELOW - 1, seed=11)
    ids = np.array(seed_items(memory, vectors))
    queries = unit_vectors(20, seed=12)
    for query in queries:  # one list: even a single probe reads every vector, so the result is exact
        found = [item.id for item, _ in memory.relevance_pool(query, size=10)]
        assert found == ids[np.argsort(-(vectors @ query))[:10]].tolist()

    more = unit_vectors(vector_index.EXACT_BELOW, seed=13)
    seed_items(memory, more)  # past EXACT_BELOW: the write rebuilds the index with lists, the old one goes
    lists = vector_index.lists_for(len(vectors) + len(more))
    assert index_names(store, memory.info.id) == [f"ks_item_vectors_ivf_ns{memory.info.id}_l{lists}"]
    assert vector_index.maintain(store.pool, memory.info) is None  # nothing more to do at this size

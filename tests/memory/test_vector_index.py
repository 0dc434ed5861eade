"""The namespace's vector index: exact search while small, an IVFFlat index whose lists grow with the data."""

from __future__ import annotations

import re
import threading

import numpy as np
import psycopg
import pytest
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


def manual_analyses(store: MemoryStore) -> list[int]:
    with store.pool.connection() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return [conn.execute("SELECT analyze_count AS n FROM pg_stat_user_tables WHERE relname = %s",
                             (table,)).fetchone()["n"] for table in ("ks_items", "ks_item_names")]


def test_small_namespaces_are_searched_exactly_and_large_ones_get_lists(store: MemoryStore, namespace: str) -> None:
    memory = MemoryStore(store.pool, params=SageParams(probes=1)).open(namespace, embedding_dim=16)
    memory.store.index_builds.wait()  # (made by the opening's check when a build was under way at the creation)
    assert index_names(store, memory.info.id) == [f"ks_item_vectors_ivf_ns{memory.info.id}_l1"]
    vectors = unit_vectors(vector_index.EXACT_BELOW - 1, seed=11)
    ids = np.array(seed_items(memory, vectors))
    queries = unit_vectors(20, seed=12)
    for query in queries:  # one list: even a single probe reads every vector, so the result is exact
        found = [item.id for item, _ in memory.relevance_pool(query, size=10)]
        assert found == ids[np.argsort(-(vectors @ query))[:10]].tolist()

    analysed = manual_analyses(store)
    more = unit_vectors(vector_index.EXACT_BELOW, seed=13)
    seed_items(memory, more)  # past EXACT_BELOW: the write has the index rebuilt with lists, the old one goes
    memory.store.index_builds.wait()
    lists = vector_index.lists_for(len(vectors) + len(more))
    assert index_names(store, memory.info.id) == [f"ks_item_vectors_ivf_ns{memory.info.id}_l{lists}"]
    # and the planner learns of the growth with it (pg_stat counts manual and automatic analyses apart)
    assert all(after > before for after, before in zip(manual_analyses(store), analysed, strict=True))
    assert vector_index.maintain(store.pool, memory.info) is None  # nothing more to do at this size


def test_a_write_that_calls_for_more_lists_does_not_wait_for_the_build(store: MemoryStore, namespace: str) -> None:
    """The rebuild runs in the background: here it waits for a writer that holds the table, and the write
    that asked for it has returned meanwhile, with searches served by the old index."""
    memory = MemoryStore(store.pool).open(namespace, embedding_dim=16)
    memory.store.index_builds.wait()  # its one-list index, made by the opening's check when not at the creation
    vectors = unit_vectors(vector_index.EXACT_BELOW, seed=5)
    with store.pool.connection() as blocker:
        blocker.execute("LOCK TABLE ks_item_vectors IN ROW EXCLUSIVE MODE")  # CREATE INDEX CONCURRENTLY waits
        writer = threading.Thread(target=seed_items, args=(memory, vectors))
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive(), "the write waited for the index build"
        with store.pool.connection() as conn:
            assert vector_index.current_lists(conn, memory.info.id) == 1
        assert len(memory.relevance_pool(vectors[0], size=10)) == 10
    memory.store.index_builds.wait()
    with store.pool.connection() as conn:
        assert vector_index.current_lists(conn, memory.info.id) == vector_index.lists_for(len(vectors))
    assert index_names(store, memory.info.id) == [
        f"ks_item_vectors_ivf_ns{memory.info.id}_l{vector_index.lists_for(len(vectors))}"]


def test_deleting_a_namespace_does_not_wait_for_searches_of_others(store: MemoryStore, namespace: str) -> None:
    """The vectors table is shared: a delete must not lock it (a plain DROP INDEX would wait here for the
    open search, and every search after would wait for the drop). Its indexes go in the background."""
    memory = store.open(namespace, embedding_dim=16)
    doomed = store.open(namespace + "-doomed", embedding_dim=16)
    seed_items(doomed, unit_vectors(3, seed=6))
    with store.pool.connection() as reader:  # a search of another namespace, its transaction still open
        reader.execute("SELECT count(*) FROM ks_item_vectors WHERE namespace_id = %s", (memory.info.id,))
        deleter = threading.Thread(target=store.delete_namespaces, args=([doomed.name],))
        deleter.start()
        deleter.join(timeout=60)
        assert not deleter.is_alive(), "the delete waited for a search of another namespace"
        assert store.namespace_info(doomed.name) is None
    store.index_builds.wait()
    assert index_names(store, doomed.info.id) == []
    assert index_names(store, memory.info.id) == [f"ks_item_vectors_ivf_ns{memory.info.id}_l1"]


@pytest.mark.parametrize(("lists", "rows"), [(100, 10_000), (300, 16_000), (150, 12_000)])
def test_the_build_memory_estimate_is_what_pgvector_asks_for(store: MemoryStore, lists: int, rows: int) -> None:
    """maintenance_work_mem is set from the estimate: pgvector's own refusal names what it needs."""
    with store.pool.connection() as conn:  # one transaction, rolled back: the table and the setting go
        conn.execute("CREATE TEMP TABLE sample (embedding vector(16))")
        conn.execute("INSERT INTO sample SELECT array_fill(g::real, ARRAY[16])::vector FROM generate_series(1, %s) g",
                     (rows,))
        conn.execute("SET LOCAL maintenance_work_mem = '1MB'")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
            conn.execute(f"CREATE INDEX ON sample USING ivfflat (embedding vector_cosine_ops) WITH (lists = {lists})")
    required_mb = int(re.search(r"memory required is (\d+) MB", str(refused.value)).group(1))
    estimate = vector_index.build_memory_bytes(lists, 16)
    assert required_mb - 1 <= estimate / 2**20 <= required_mb  # pgvector rounds up to the next MB


@given(st.integers(min_value=1, max_value=vector_index.MAX_LISTS), st.integers(min_value=0, max_value=50))
def test_probes_scale_with_the_index_unless_given(lists: int, given_probes: int) -> None:
    probes = vector_index.probes_for(lists, given_probes)
    if given_probes:
        assert probes == given_probes  # an explicit setting always wins
    else:  # at least 3, growing with the index, about 0.8% of its lists, never more lists than there are
        assert vector_index.MIN_PROBES <= probes <= max(vector_index.MIN_PROBES, lists)
        assert vector_index.probes_for(lists + 1) >= probes
        assert probes == vector_index.MIN_PROBES or 0.006 <= probes / lists <= 0.009
    # the settings measured on the hard set (docs/memory.md): 3 at 100K items, 16 at 1M
    assert vector_index.probes_for(320) == 3 and vector_index.probes_for(1920) == 16


def test_a_search_reads_the_probes_its_index_calls_for(store: MemoryStore, namespace: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelsage.memory_backend import retrieval

    memory = store.open(namespace, embedding_dim=16)
    vectors = unit_vectors(vector_index.EXACT_BELOW + 1000, seed=8)
    seed_items(memory, vectors)
    store.index_builds.wait()
    lists = vector_index.lists_for(len(vectors))
    monkeypatch.setattr(vector_index, "LISTS_PER_PROBE", 4)  # a share the test's small index can show
    for given_probes, expected in ((0, lists // 4), (2, 2)):
        with store.pool.connection() as conn, conn.transaction():
            found = retrieval.relevance_pool(conn, memory.info, vectors[0], 10, exclude_resident=False,
                                             probes=given_probes)
            assert conn.execute("SELECT current_setting('ivfflat.probes') AS p").fetchone()["p"] == str(expected)
        assert len(found) == 10


def test_probes_are_set_as_auto_or_a_count_and_shown_so() -> None:
    from kernelsage.cli.memory import _settings
    from kernelsage.errors import ConfigurationError
    from kernelsage.memory_backend.params import parse_overrides

    assert parse_overrides(["probes=auto"]) == {"probes": 0} and parse_overrides("probes=8") == {"probes": 8}
    with pytest.raises(ConfigurationError, match="probes=-1 must be 0"):
        SageParams(probes=-1)
    assert _settings({"probes": 0, "B": 10}) == "B=10 probes=auto" and _settings({"probes": 5}) == "probes=5"

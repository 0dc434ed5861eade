"""Vector index builds of different namespaces take turns (two concurrent builds on the one shared vectors
table deadlock), and what an aborted build leaves is removed. Real processes against the real server."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend import vector_index
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import seed_items, unit_vectors
from tests.memory.test_races import _deadlocks

GROWN_TO, BATCH, DIM = 12_000, 1_000, 96  # rebuilds at 5K, 8K and 12K items (20, 32, 48 lists)


def _grower(url: str, name: str, seed: int, start: float) -> None:
    """Grow one namespace in batches, as a bulk load does: each batch may ask for a build."""
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True)
    memory = store.open(name, embedding_dim=DIM)
    time.sleep(max(0.0, start - time.time()))  # both processes start growing at once
    for offset in range(0, GROWN_TO, BATCH):
        seed_items(memory, unit_vectors(BATCH, dim=DIM, seed=seed * 1000 + offset))
    store.index_builds.wait()
    store.close()


def _index_rows(conn: psycopg.Connection, namespace_id: int) -> list[tuple[str, bool]]:
    rows = conn.execute("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE starts_with(c.relname, %s) ORDER BY 1", (q.vector_index_prefix(namespace_id),))
    return [(r["relname"], r["indisvalid"]) for r in rows.fetchall()]


def test_two_processes_growing_two_namespaces_build_without_deadlock(store: MemoryStore, database_url: str,
                                                                      namespace: str) -> None:
    deadlocks = _deadlocks(database_url)
    names = [f"{namespace}-a", f"{namespace}-b"]
    context = multiprocessing.get_context("spawn")
    start = time.time() + 6.0
    workers = [context.Process(target=_grower, args=(database_url, name, k, start)) for k, name in enumerate(names)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=300)
    assert [p.exitcode for p in workers] == [0, 0]
    assert _deadlocks(database_url) == deadlocks
    with store.pool.connection() as conn:
        for name in names:  # each has one valid index that its size calls for, nothing invalid beside it
            info = store.namespace_info(name)
            lists = vector_index.current_lists(conn, info.id)
            assert lists > 1 and not vector_index.needs_rebuild(lists, GROWN_TO)  # built at 11K or 12K items
            assert _index_rows(conn, info.id) == [(q.vector_index_name(info.id, lists), True)]


def _abort_a_build(store: MemoryStore, namespace_id: int, dim: int, lists: int) -> None:
    """Leave an invalid index, as a build the server aborts does: a concurrent build that times out waiting
    for a writer that holds the table (after it has entered the catalog)."""
    with store.pool.connection() as writer:
        writer.execute("LOCK TABLE ks_item_vectors IN ROW EXCLUSIVE MODE")
        with store.pool.connection() as builder:
            builder.autocommit = True
            with _turn(builder):
                builder.execute("SET lock_timeout = '300ms'")
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    builder.execute(q.create_vector_index(namespace_id, dim, lists, concurrently=True))
                builder.execute("RESET lock_timeout")
            builder.autocommit = False


@contextmanager
def _turn(conn: psycopg.Connection) -> Iterator[None]:
    """The test's own concurrent builds take their turn too: beside another build they would deadlock."""
    conn.execute("SELECT pg_advisory_lock(%s, %s)", (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))
    try:
        yield
    finally:
        conn.execute(q.VECTOR_INDEX_UNLOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))


def test_what_an_aborted_build_leaves_is_removed(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    seed_items(memory, unit_vectors(50, seed=9))
    store.index_builds.wait()
    ns = memory.info.id
    _abort_a_build(store, ns, 16, 7)
    with store.pool.connection() as conn:  # a second valid index too: a drop that did not happen
        conn.autocommit = True
        with _turn(conn):
            conn.execute(q.create_vector_index(ns, 16, 3, concurrently=True))
        assert _index_rows(conn, ns) == [(q.vector_index_name(ns, 1), True), (q.vector_index_name(ns, 3), True),
                                         (q.vector_index_name(ns, 7), False)]
        assert vector_index.current_lists(conn, ns) == 3
        conn.autocommit = False  # back to the pool as it came: the next user may be _abort_a_build's writer
    # Nothing about the size calls for a build; the leftovers alone are removed, the largest valid one kept.
    assert vector_index.maintain(store.pool, memory.info) is None
    with store.pool.connection() as conn:
        assert _index_rows(conn, ns) == [(q.vector_index_name(ns, 3), True)]
    _abort_a_build(store, ns, 16, 5)
    store.open(namespace)  # opening for writing checks the index in the background
    store.index_builds.wait()
    with store.pool.connection() as conn:
        assert _index_rows(conn, ns) == [(q.vector_index_name(ns, 3), True)]
    assert len(memory.relevance_pool(unit_vectors(1, seed=9)[0], size=5)) == 5


def test_a_build_waits_for_another_namespaces_build_and_then_runs(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    store.index_builds.wait()  # its one-list index, made by the opening's check when not at the creation
    with store.pool.connection() as other:  # another process's build under way holds the one build lock
        other.autocommit = True
        assert other.execute(q.VECTOR_INDEX_LOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL)).fetchone()["locked"]
        try:
            seed_items(memory, unit_vectors(vector_index.EXACT_BELOW, seed=14))  # asks for a build
            time.sleep(1.0)
            with store.pool.connection() as conn:
                assert vector_index.current_lists(conn, memory.info.id) == 1  # still waiting its turn
        finally:
            other.execute(q.VECTOR_INDEX_UNLOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))
            other.autocommit = False
    store.index_builds.wait()
    with store.pool.connection() as conn:
        assert vector_index.current_lists(conn, memory.info.id) == vector_index.lists_for(vector_index.EXACT_BELOW)


def test_closing_gives_up_a_build_still_waiting_for_its_turn(store: MemoryStore, namespace: str) -> None:
    own = MemoryStore(store.pool)
    memory = own.open(namespace, embedding_dim=16)
    with store.pool.connection() as other:
        other.autocommit = True
        other.execute(q.VECTOR_INDEX_LOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))
        try:
            seed_items(memory, unit_vectors(vector_index.EXACT_BELOW, seed=15))
            closer = threading.Thread(target=own.close)
            closer.start()
            closer.join(timeout=10)
            assert not closer.is_alive(), "close waited for another process's build"
        finally:
            other.execute(q.VECTOR_INDEX_UNLOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))
            other.autocommit = False


def test_a_write_too_small_to_call_for_a_build_is_not_checked(store: MemoryStore, namespace: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    memory = store.open(namespace, embedding_dim=16)
    store.index_builds.wait()  # opening checks: the store now knows the namespace's size
    checked: list[int] = []
    real = vector_index.maintain

    def maintain(pool, info, **kwargs):  # type: ignore[no-untyped-def]
        checked.append(info.id)
        return real(pool, info, **kwargs)

    monkeypatch.setattr(vector_index, "maintain", maintain)
    seed_items(memory, unit_vectors(10, seed=16))  # 10 rows: one list is still right, no count asked for
    store.index_builds.wait()
    assert checked == []
    store.index_builds.request(memory.info, added=vector_index.EXACT_BELOW)  # past exact search by its count
    store.index_builds.wait()
    assert checked == [memory.info.id]  # checked (10 rows in truth: no build), and counted again
    store.index_builds.request(memory.info, added=1)
    store.index_builds.wait()
    assert checked == [memory.info.id]

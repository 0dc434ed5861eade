"""A namespace's vector index: exact search while it is small, an IVFFlat index with lists grown with it.

Why IVFFlat and not HNSW (measured, docs/memory.md): on clustered data whose clusters are well separated,
HNSW's greedy walk stays in the cluster it enters; at 100K items its recall@10 was 0.26 at ef_search 100
and 0.68 at ef_search 1000. IVFFlat's lists are k-means centroids, which find the query's cluster directly.
Its lists are computed from the data at build time, so the index is rebuilt, concurrently with reads and
writes, each time the namespace has grown enough to need GROWTH (1.5) times the lists.
"""

from __future__ import annotations

import logging
import math

import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import NamespaceInfo

EXACT_BELOW = 5_000  # below this many items a namespace keeps one list: every search reads all its vectors
ROWS_PER_LIST = 250  # the lists' size when built: 400 lists at 100K (316 lists there gave recall 0.99 at 1 probe)
GROWTH = 1.5  # rebuilt when the data needs this many times the lists: lists hold 250 to 375 rows
MAX_LISTS = 4_000  # k-means build time grows with lists x sample (50 rows per list): bounded
_log = logging.getLogger(__name__)


def lists_for(rows: int) -> int:
    """The lists an index over `rows` vectors should have: 1 (exact search) below EXACT_BELOW rows."""
    if rows < EXACT_BELOW:
        return 1
    return min(MAX_LISTS, max(2, math.ceil(rows / ROWS_PER_LIST)))


def needs_rebuild(current_lists: int | None, rows: int) -> bool:
    """Whether an index built with `current_lists` (None: there is none) should be rebuilt for `rows`:
    when there is none, when it leaves exact search, or when the data needs GROWTH times its lists
    (rebuilds at sizes growing by GROWTH cost about three times the last build in total)."""
    wanted = lists_for(rows)
    if current_lists is None:
        return True
    if current_lists == 1:
        return wanted > 1
    return wanted >= GROWTH * current_lists


def _indexes(conn: psycopg.Connection, namespace_id: int) -> list[dict]:
    return conn.execute(q.VECTOR_INDEXES, (q.vector_index_prefix(namespace_id),)).fetchall()


def current_lists(conn: psycopg.Connection, namespace_id: int) -> int | None:
    """The lists of the namespace's usable vector index (the largest, while a rebuild swaps two)."""
    valid = [r["lists"] for r in _indexes(conn, namespace_id) if r["valid"]]
    return max(valid) if valid else None


def maintain(pool: ConnectionPool, info: NamespaceInfo) -> int | None:
    """Rebuild the namespace's vector index when its size calls for it; returns the lists it was rebuilt
    with, or None when nothing was done (no need, or another process is rebuilding it now).

    Built with CREATE INDEX CONCURRENTLY beside the old index, which serves searches until it is dropped,
    so neither searches nor commits wait for the build. A build cut short (a killed process) leaves an
    invalid index behind, which the next call removes before building again. A failed build is logged, not
    raised: the write that called it is committed, searches stay correct, and the next write tries again.
    """
    try:
        return _maintain(pool, info)
    except psycopg.Error as exc:
        _log.warning("could not rebuild the vector index of namespace %r (%s); searches use the old one",
                     info.name, " ".join(str(exc).split()))
        return None


def _maintain(pool: ConnectionPool, info: NamespaceInfo) -> int | None:
    with pool.connection() as conn:
        rows = conn.execute(q.COUNT_VECTORS, (info.id,)).fetchone()["n"]
        current = current_lists(conn, info.id)
        conn.rollback()
        if not needs_rebuild(current, rows):
            return None
        conn.autocommit = True  # CREATE / DROP INDEX CONCURRENTLY cannot run inside a transaction
        try:
            if not conn.execute(q.VECTOR_INDEX_LOCK, (q.INDEX_LOCK_CLASS, info.id)).fetchone()["locked"]:
                return None
            try:
                return _rebuild(conn, info)
            finally:
                conn.execute(q.VECTOR_INDEX_UNLOCK, (q.INDEX_LOCK_CLASS, info.id))
        finally:
            conn.autocommit = False


def _rebuild(conn: psycopg.Connection, info: NamespaceInfo) -> int | None:
    for index in _indexes(conn, info.id):  # left by a build that was cut short
        if not index["valid"]:
            conn.execute(q.drop_index_concurrently(index["name"]))
    rows = conn.execute(q.COUNT_VECTORS, (info.id,)).fetchone()["n"]
    current = current_lists(conn, info.id)
    if not needs_rebuild(current, rows):  # another process rebuilt it meanwhile
        return None
    lists = lists_for(rows)
    conn.execute("SET maintenance_work_mem = '512MB'")  # k-means sample and the lists in memory
    conn.execute(q.create_vector_index(info.id, info.embedding_dim, lists, concurrently=True))
    conn.execute("RESET maintenance_work_mem")
    for index in _indexes(conn, info.id):
        if index["lists"] != lists:
            conn.execute(q.drop_index_concurrently(index["name"]))
    return lists

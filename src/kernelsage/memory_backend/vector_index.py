"""A namespace's vector index: exact search while it is small, an IVFFlat index with lists grown with it.

Why IVFFlat and not HNSW (measured, docs/memory.md): on clustered data whose clusters are well separated,
HNSW's greedy walk stays in the cluster it enters; at 100K items its recall@10 was 0.26-0.35 at ef_search
100 (two query sets) and 0.68 at ef_search 1000. IVFFlat's lists are k-means centroids, which find the
query's cluster directly.
Its lists are computed from the data at build time, so the index is rebuilt, concurrently with reads and
writes, each time the namespace has grown enough to need GROWTH (1.5) times the lists.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import autocommit
from kernelsage.memory_backend.items import NamespaceInfo

EXACT_BELOW = 5_000  # below this many items a namespace keeps one list: every search reads all its vectors
ROWS_PER_LIST = 250  # the lists' size when built: 400 lists at 100K (316 lists there gave recall 0.99 at 1 probe)
GROWTH = 1.5  # rebuilt when the data needs this many times the lists: lists hold 250 to 375 rows
MAX_LISTS = 2_000  # k-means keeps a bound per sample row and list: 50 rows per list make it 200 x lists^2
# bytes (0.8 GB at 2,000 lists, 3.2 GB at 4,000), so the lists stop growing here: 500 rows per list at 1M items
SAMPLE_ROWS_PER_LIST, MIN_SAMPLE_ROWS = 50, 10_000  # pgvector's k-means sample
MIN_PROBES, LISTS_PER_PROBE = 3, 120  # automatic probes: read about 0.8% of the lists, never fewer than 3
_log = logging.getLogger(__name__)


def lists_for(rows: int) -> int:
    """The lists an index over `rows` vectors should have: 1 (exact search) below EXACT_BELOW rows."""
    if rows < EXACT_BELOW:
        return 1
    return min(MAX_LISTS, max(2, math.ceil(rows / ROWS_PER_LIST)))


def probes_for(lists: int | None, probes: int = 0) -> int:
    """The lists a search reads: `probes` when given (> 0), else scaled with the index's lists. A fixed
    count reads a shrinking share of a growing index, and recall falls with it (hard set, 3 probes: 0.997
    at 320 lists, 0.897 at 1,920); a fixed share (about 0.8%) kept it at 0.97 and above."""
    if probes > 0:
        return probes
    return max(MIN_PROBES, (lists or 1) // LISTS_PER_PROBE)


def build_memory_bytes(lists: int, dim: int) -> int:
    """The memory pgvector's IVFFlat k-means asks maintenance_work_mem for (its sample, the centres, a
    lower bound per sample row and centre, the centres' pairwise distances), as its build computes it.
    pgvector caps the sample by the table's pages, not its rows; here it is not capped (an over-estimate
    only for tables smaller than the sample)."""
    samples = max(SAMPLE_ROWS_PER_LIST * lists, MIN_SAMPLE_ROWS)
    vector = 8 + 4 * dim
    return (samples * vector + 3 * lists * vector + 4 * lists * dim + 4 * lists + 8 * samples
            + 4 * samples * lists + 4 * lists * lists + 8 * lists)


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
    return _send_indexes(conn, namespace_id).fetchall()


def _send_indexes(conn: psycopg.Connection, namespace_id: int) -> psycopg.Cursor:
    prefix = q.vector_index_prefix(namespace_id)
    return conn.execute(q.VECTOR_INDEXES, {"prefix": prefix, "past": prefix[:-1] + chr(ord(prefix[-1]) + 1)})


def current_lists(conn: psycopg.Connection, namespace_id: int) -> int | None:
    """The lists of the namespace's usable vector index (the largest, while a rebuild swaps two)."""
    return send_current_lists(conn, namespace_id)()


def send_current_lists(conn: psycopg.Connection, namespace_id: int) -> Callable[[], int | None]:
    """`current_lists` in two steps: the query is sent now, its answer read by the function returned."""
    cursor = _send_indexes(conn, namespace_id)

    def read() -> int | None:
        valid = [r["lists"] for r in cursor.fetchall() if r["valid"]]
        return max(valid) if valid else None
    return read


def maintain(pool: ConnectionPool, info: NamespaceInfo, *, stop: threading.Event | None = None,
             seen: Callable[[int, int | None], None] | None = None) -> int | None:
    """Rebuild the namespace's vector index when its size calls for it, and remove what an aborted build
    left (an invalid index, an old index beside its replacement); returns the lists it was rebuilt with,
    or None when no build was needed (or `stop` was set while it waited for another build to end).

    Built with CREATE INDEX CONCURRENTLY beside the old index, which serves searches until it is dropped,
    so neither searches nor commits wait for the build. Builds of every namespace take turns under one
    database-wide lock (see `_build_lock`). A build the server aborts is cleaned up and tried again
    (BUILD_ATTEMPTS in all); a failure after that is logged, not raised: the write that called it is
    committed, searches stay correct with the old index, and the next write or open tries again.

    `seen(rows, lists)` is told the namespace's size and its index's lists when it ends with an index that
    needs no rebuild for that size.
    """
    for attempt in range(1, BUILD_ATTEMPTS + 1):
        try:
            return _maintain(pool, info, stop, seen or (lambda rows, lists: None))
        except psycopg.Error as exc:
            retry = attempt < BUILD_ATTEMPTS and isinstance(exc, _RETRIED)
            _log.warning("could not rebuild the vector index of namespace %r (%s); %s", info.name,
                         " ".join(str(exc).split()), "trying again" if retry else "searches use the old one")
            if not retry:
                return None
            time.sleep(0.2 * attempt)
    return None


BUILD_ATTEMPTS = 3
_RETRIED = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure, psycopg.errors.LockNotAvailable)
BUILD_LOCK_POLL_S = 0.25  # how often a build waiting for another one asks for the lock again


def _leftovers(indexes: list[dict]) -> list[str]:
    """Indexes an aborted build or drop left: invalid ones, and valid ones beside a larger valid one."""
    largest = max((r["lists"] for r in indexes if r["valid"]), default=None)
    return [r["name"] for r in indexes if not r["valid"] or r["lists"] != largest]


@contextmanager
def _build_lock(conn: psycopg.Connection, stop: threading.Event | None) -> Iterator[bool]:
    """Hold the database-wide index-build lock (yields False when `stop` was set while waiting).

    One lock for every namespace, not one each: all namespaces' indexes are partial indexes on one table,
    and two CREATE INDEX CONCURRENTLY on one table deadlock (each waits for the other's snapshot; on
    indexes with an expression or a predicate PostgreSQL cannot tell that they need not). The lock is
    asked for by polling with pg_try_advisory_lock, never by waiting inside a statement: a waiting
    statement holds a snapshot, which the build under way would wait for in turn. A transaction creating a
    namespace builds its one-list index only while it holds the same lock (`namespaces.create_if_missing`):
    its plain CREATE INDEX and a concurrent build would wait for each other.
    """
    stop = stop or threading.Event()
    while not conn.execute(q.VECTOR_INDEX_LOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL)).fetchone()["locked"]:
        if stop.wait(BUILD_LOCK_POLL_S):
            yield False
            return
    try:
        yield True
    finally:
        conn.execute(q.VECTOR_INDEX_UNLOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))


class IndexBuilds:
    """A store's index maintenance, on one background thread: rebuilds (the write that made a namespace
    big enough returns at once; a build takes about 10 s at 100K items, and searches use the old index
    until the new one replaces it) and the drops of deleted namespaces' indexes. `close` waits for the
    job under way, so none is left half done."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._queued: set[int] = set()
        self._known: dict[int, tuple[int, int | None]] = {}  # namespace -> (rows, lists) since its last check
        self._stop = threading.Event()  # set by close: a job still waiting for another build gives up

    def request(self, info: NamespaceInfo, *, added: int | None = None) -> None:
        """Check the namespace's index (and rebuild it if its size calls for it) in the background.

        `added`: the items the write that asks has just added. The rows the last check of this store counted
        plus what its writes added since are then enough to tell that no rebuild is due, without a check (a
        count of the namespace's vectors on a connection of the pool after every commit that stores items).
        With one writing store (the simulator's streams) the check runs after the same write as without
        the count. Each store counts only its own writes on top of its last check, so with several writing
        stores the rebuild can come some writes after the one that made it due: when one of them counts
        enough, or opens the namespace (which always checks).
        """
        with self._lock:
            known = self._known.get(info.id)
            if added is not None and known is not None:
                known = (known[0] + added, known[1])
                self._known[info.id] = known
                if not needs_rebuild(known[1], known[0]):
                    return
            if info.id in self._queued:
                return
            self._queued.add(info.id)
        self._submit(lambda pool: self._build(pool, info))

    def _build(self, pool: ConnectionPool, info: NamespaceInfo) -> None:
        with self._lock:
            self._queued.discard(info.id)  # a write during the build asks again, and is checked after it
            self._known.pop(info.id, None)  # such a write finds no count to add to: it asks for a check

        def seen(rows: int, lists: int | None) -> None:
            with self._lock:
                if info.id not in self._queued:  # a check asked for meanwhile counts again
                    self._known[info.id] = (rows, lists)
        maintain(pool, info, stop=self._stop, seen=seen)

    def _submit(self, job: Callable[[ConnectionPool], object]) -> None:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelsage-index")
            self._executor.submit(self._run, job)

    def _run(self, job: Callable[[ConnectionPool], object]) -> None:
        try:
            job(self._pool)
        except Exception as exc:  # e.g. the pool closed under it: the next write asks again
            _log.warning("vector index maintenance failed: %s", exc)

    def drop_orphans(self) -> None:
        """Drop, in the background, the indexes of namespaces deleted since (see `drop_orphaned`)."""
        self._submit(drop_orphaned)  # not given up at close: a drop is quick, and nothing else would sweep

    def wait(self) -> None:
        """Return when every build requested so far has ended."""
        with self._lock:
            executor = self._executor
        if executor is not None:
            executor.submit(lambda: None).result()

    def close(self) -> None:
        """Wait for the build under way (one still waiting for another process's build is given up:
        the next write or open asks again)."""
        self._stop.set()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


def _maintain(pool: ConnectionPool, info: NamespaceInfo, stop: threading.Event | None,
              seen: Callable[[int, int | None], None]) -> int | None:
    with pool.connection() as conn:
        exists = _exists(conn, info)
        rows = conn.execute(q.COUNT_VECTORS, (info.id,)).fetchone()["n"]
        indexes = _indexes(conn, info.id)
        conn.rollback()
        if not exists:
            return None
        current = max((r["lists"] for r in indexes if r["valid"]), default=None)
        if not needs_rebuild(current, rows) and not _leftovers(indexes):
            seen(rows, current)
            return None
        # CREATE / DROP INDEX CONCURRENTLY cannot run inside a transaction
        with autocommit(conn), _build_lock(conn, stop) as locked:
            return _rebuild(conn, info, seen) if locked else None


def _exists(conn: psycopg.Connection, info: NamespaceInfo) -> bool:
    """Whether the namespace still exists: a deleted one's indexes are `drop_orphaned`'s, and a build for it
    would only leave one more behind (checked again in the build's turn, before which its deleter's drop
    waits: an index built for a namespace deleted meanwhile is dropped in the turn after)."""
    return conn.execute(q.NAMESPACE_EXISTS, (info.id,)).fetchone()["found"]


def _rebuild(conn: psycopg.Connection, info: NamespaceInfo, seen: Callable[[int, int | None], None]) -> int | None:
    if not _exists(conn, info):
        return None
    for name in _leftovers(_indexes(conn, info.id)):  # left by a build or a drop that was cut short
        conn.execute(q.drop_index_concurrently(name))
    rows = conn.execute(q.COUNT_VECTORS, (info.id,)).fetchone()["n"]
    current = current_lists(conn, info.id)
    if not needs_rebuild(current, rows):  # another process rebuilt it meanwhile
        seen(rows, current)
        return None
    lists = lists_for(rows)
    megabytes = build_memory_bytes(lists, info.embedding_dim) * 5 // 4 // 2**20 + 64  # with a margin
    conn.execute(f"SET maintenance_work_mem = '{max(megabytes, 128)}MB'")
    try:
        conn.execute(q.create_vector_index(info.id, info.embedding_dim, lists, concurrently=True))
    except psycopg.Error:  # an aborted concurrent build leaves an invalid index: not left for later
        conn.execute(q.drop_index_concurrently(q.vector_index_name(info.id, lists)))
        raise
    finally:  # the connection goes back to the pool
        conn.execute("RESET maintenance_work_mem")
    for index in _indexes(conn, info.id):
        if index["lists"] != lists:
            conn.execute(q.drop_index_concurrently(index["name"]))
    # The namespace has grown by half since the planner last had to know: a count of its items planned from
    # older statistics (a few hundred rows) reads every entry of the namespace through a bitmap instead of
    # stopping at its limit (lexical retrieval: 5 ms instead of 1.3 at 100K items, until autovacuum came).
    conn.execute(q.ANALYZE_ITEM_TABLES)
    seen(rows, lists)
    return lists


def drop_orphaned(pool: ConnectionPool, stop: threading.Event | None = None) -> list[str]:
    """Drop the vector indexes whose namespace was deleted; returns their names.

    A delete removes the namespace's rows in its transaction and leaves its indexes to this: DROP INDEX
    CONCURRENTLY (outside any transaction) does not lock the vectors table that every namespace shares,
    as a plain DROP INDEX would while it waits for the searches under way. Failures are logged; indexes
    left behind are dropped by the next call.
    """
    dropped = []
    # (a concurrent drop and build on one table deadlock too: the build lock)
    with pool.connection() as conn, autocommit(conn), _build_lock(conn, stop) as locked:
        for row in conn.execute(q.ORPHANED_VECTOR_INDEXES, (q.VECTOR_INDEX_FAMILY,)).fetchall() if locked else ():
            try:
                conn.execute(q.drop_index_concurrently(row["name"]))
                dropped.append(row["name"])
            except psycopg.Error as exc:
                _log.warning("could not drop the vector index %s of a deleted namespace (%s)", row["name"],
                             " ".join(str(exc).split()))
    return dropped


"""The rules competing for hot memory, read incrementally: consolidation runs after every episode, and
reading every validated item each time (10K of them: most of its cost) re-reads rows nothing changed.

A store keeps, per namespace, the candidate columns of its last consolidation (`CandidateCache`). The
next one re-reads only the rows that can have changed since: the items credited by episodes committed
after it (every statistics write of a commit credits the items it writes) and the rows consolidation
itself wrote. What depends on the episode count (the eligible episodes of an item not resident) is kept
as its parts and computed at the current count, so nothing read earlier goes stale. Any consolidation
bumps the namespace's `ugc_epoch`; a cache whose epoch is not the namespace's (another process
consolidated, or a transaction of this one was rolled back) is dropped and everything is read again.
The result is the full read's, column for column (tests/memory/test_incremental_ugc.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np
import psycopg
from psycopg.rows import tuple_row

from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.item_rows import GateCandidates

_DTYPES = (np.int64, np.float64, np.int64, np.int64, np.float64, np.float64, np.int64, np.int64, np.bool_,
           np.int64, np.bool_, np.bool_, np.bool_)  # the columns of q.CANDIDATE_COLUMNS, in order
_FIELDS = ("ids", "utility", "n_ado", "distinct_ops", "access", "n_ret_cold", "banked", "since", "has_since",
           "tokens", "hot", "validated", "has_rule")


@dataclass(frozen=True)
class CandidateCache:
    """A namespace's candidate columns as of episode `seq` and consolidation epoch `epoch`, sorted by id,
    with the rows written since (`dirty`), which the next read takes again. `k_ado` is the gate's
    adoption count the rows were filtered with."""

    epoch: int
    seq: int
    k_ado: int
    columns: dict[str, np.ndarray]
    dirty: frozenset[int] = frozenset()

    def at(self, seq: int) -> GateCandidates:
        """The candidates as consolidation reads them at episode `seq` (eligible episodes counted to it)."""
        c = self.columns
        eligible = (c["banked"] + np.where(c["has_since"], seq - c["since"], 0)).astype(np.float64)
        return GateCandidates(ids=c["ids"], utility=c["utility"], n_ado=c["n_ado"], distinct_ops=c["distinct_ops"],
                              access=c["access"], n_ret_cold=c["n_ret_cold"], eligible_episodes=eligible,
                              tokens=c["tokens"], hot=c["hot"], validated=c["validated"], has_rule=c["has_rule"])

    def written(self, epoch: int, item_ids: list[int]) -> CandidateCache:
        """The cache after consolidation wrote these rows (and bumped the epoch to `epoch`)."""
        return replace(self, epoch=epoch, dirty=self.dirty | frozenset(item_ids))

    def moved(self, seq: int, promoted: list[int], access: list[float], demoted: list[int]) -> CandidateCache:
        """The cache after queries.PROMOTE (with these access estimates) and queries.DEMOTE at episode `seq`,
        applied to its columns as the statements apply them to the rows, so a swap of the hot set is not read
        back (rows also marked dirty are read again anyway). Every moved row is a candidate before and after."""
        c = {f: v.copy() for f, v in self.columns.items()}
        up = np.searchsorted(c["ids"], np.asarray(promoted, dtype=np.int64))
        down = np.searchsorted(c["ids"], np.asarray(demoted, dtype=np.int64))
        assert np.array_equal(c["ids"][up], promoted) and np.array_equal(c["ids"][down], demoted)
        c["banked"][up] += np.where(c["has_since"][up], seq - c["since"][up], 0)
        c["since"][up], c["has_since"][up], c["access"][up] = 0, False, access
        c["since"][down], c["has_since"][down] = seq, True
        c["hot"][up], c["validated"][up] = True, False
        c["hot"][down], c["validated"][down] = False, True
        return replace(self, columns=c)


class CandidateCaches:
    """A store's caches, one per namespace. Consolidations of one namespace are serialised by its advisory
    lock, so a cache is only read and replaced by one consolidation at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._caches: dict[int, CandidateCache] = {}

    def get(self, namespace_id: int) -> CandidateCache | None:
        with self._lock:
            return self._caches.get(namespace_id)

    def put(self, namespace_id: int, cache: CandidateCache | None) -> None:
        """Keep `cache` (None forgets the namespace's: the next consolidation reads everything)."""
        with self._lock:
            if cache is None:
                self._caches.pop(namespace_id, None)
            else:
                self._caches[namespace_id] = cache


def _columns(conn: psycopg.Connection, query: str, params: dict) -> dict[str, np.ndarray]:
    """The columns one of the CANDIDATES_* queries reads, sorted by id here (one sort, not one per column)."""
    with conn.cursor(row_factory=tuple_row, binary=True) as cursor:
        arrays = cursor.execute(query, params).fetchone()
    assert arrays is not None  # an aggregate always returns its row (of NULLs when nothing matched)
    columns: dict[str, np.ndarray] = {f: np.array(a or [], dtype=t)
                                      for f, a, t in zip(_FIELDS, arrays, _DTYPES, strict=True)}
    order = np.argsort(columns["ids"], kind="stable")
    return {f: v[order] for f, v in columns.items()}


def epoch(conn: psycopg.Connection, namespace_id: int) -> int:
    return int(conn.execute(q.UGC_EPOCH, (namespace_id,)).fetchone()["ugc_epoch"])


def bump_epoch(conn: psycopg.Connection, namespace_id: int) -> int:
    """Mark that consolidation wrote rows of the namespace (under its row lock); returns the new epoch."""
    return int(conn.execute(q.BUMP_UGC_EPOCH, (namespace_id,)).fetchone()["ugc_epoch"])


def read(conn: psycopg.Connection, namespace_id: int, seq: int, k_ado: int,
         cache: CandidateCache | None) -> CandidateCache:
    """The namespace's candidates at episode `seq`: from `cache` plus the rows changed since, when the cache
    is still valid, else read whole. Call it under the namespace's row lock (no commit runs meanwhile)."""
    now = epoch(conn, namespace_id)
    if cache is None or cache.epoch != now or cache.k_ado != k_ado or cache.seq > seq:
        columns = _columns(conn, q.CANDIDATES_OF_NAMESPACE, {"ns": namespace_id, "k": k_ado})
        return CandidateCache(epoch=now, seq=seq, k_ado=k_ado, columns=columns)
    changed = conn.execute(q.CREDITED_SINCE, (namespace_id, cache.seq)).fetchone()["ids"] or []
    stale = np.union1d(np.asarray(changed, dtype=np.int64), np.fromiter(cache.dirty, np.int64, len(cache.dirty)))
    if not len(stale):
        return replace(cache, seq=seq)
    fresh = _columns(conn, q.CANDIDATES_OF_IDS, {"k": k_ado, "ids": stale.tolist()})
    keep = ~np.isin(cache.columns["ids"], stale)
    merged = {f: np.concatenate([cache.columns[f][keep], fresh[f]]) for f in _FIELDS}
    order = np.argsort(merged["ids"], kind="stable")
    return CandidateCache(epoch=now, seq=seq, k_ado=k_ado, columns={f: v[order] for f, v in merged.items()})

"""Items in the database: storing new ones with their vectors, reading them back, their statistics.

The records themselves (NewItem, MemoryItem) are in items.py; this module moves them in and out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from pgvector import Vector
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from kernelsage.errors import NamespaceError
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import MemoryItem, NamespaceInfo, NewItem
from kernelsage.memory_backend.records import ItemStats
from kernelsage.memory_backend.tokens import TokenCounter
from kernelsage.memory_backend.vectors import checked_vector

if TYPE_CHECKING:  # only annotations: a memory command must not load the model stack
    from langchain_core.embeddings import Embeddings


def to_item(row: dict[str, Any]) -> MemoryItem:
    return MemoryItem(**{**row, "adopting_ops": tuple(sorted(row["adopting_ops"]))})


def embed_items(items: Sequence[NewItem], embeddings: Embeddings | None, dim: int) -> list[np.ndarray]:
    """Every item's vector, checked against the namespace's dimension; computed where missing."""
    missing = [i for i, item in enumerate(items) if item.embedding is None]
    computed: dict[int, list[float]] = {}
    if missing:
        if embeddings is None:
            raise NamespaceError("items without an embedding need the memory to be opened with embeddings")
        vectors = embeddings.embed_documents([items[i].text for i in missing])
        computed = dict(zip(missing, vectors, strict=True))
    return [
        checked_vector(computed.get(i, item.embedding), dim, f"embedding of item {i}")  # type: ignore[arg-type]
        for i, item in enumerate(items)
    ]


def next_item_ids(conn: psycopg.Connection, count: int) -> list[int]:
    """Reserve `count` new item ids."""
    return [r["id"] for r in conn.execute(q.NEXT_ITEM_IDS, (count,)).fetchall()]


def insert_items(conn: psycopg.Connection, namespace_id: int, items: Sequence[NewItem],
                 vectors: Sequence[np.ndarray], seq: int, count_tokens: TokenCounter, *,
                 copy: bool = True) -> list[int]:
    """Store new cold items and their vectors; `seq` is the namespace's episode sequence now, from
    which the items' eligible episodes are counted. Returns the new ids in the order of `items`.

    `copy` sends the rows with COPY (many items); without it, as two statements with array parameters,
    which pipeline mode allows (the few items of an episode commit). Both store the same rows.
    """
    if not items:
        return []
    ids = next_item_ids(conn, len(items))
    if not copy:
        conn.execute(q.INSERT_ITEMS, {
            "ns": namespace_id, "seq": seq, "ids": ids, "kinds": [i.kind for i in items],
            "texts": [i.text for i in items], "evidence": [i.evidence for i in items],
            "code": [i.code_example for i in items], "operators": [i.operator for i in items],
            "episodes": [i.source_episode for i in items], "tokens": [count_tokens(i.text) for i in items],
            "metadata": [Jsonb(i.metadata) for i in items],
        })
        conn.execute(q.INSERT_ITEM_VECTORS, (namespace_id, ids, [Vector(v).to_text() for v in vectors]))
        return ids
    with conn.cursor().copy(q.COPY_ITEMS) as copy:
        for item_id, item in zip(ids, items, strict=True):
            copy.write_row((
                item_id, namespace_id, item.kind, item.text, item.evidence, item.code_example,
                item.operator, item.source_episode, count_tokens(item.text), Jsonb(item.metadata), seq,
            ))
    with conn.cursor().copy(q.COPY_ITEM_VECTORS) as copy:
        for item_id, vector in zip(ids, vectors, strict=True):
            copy.write_row((item_id, namespace_id, vector))
    return ids


def get_item(conn: psycopg.Connection, info: NamespaceInfo, item_id: int) -> MemoryItem:
    row = conn.execute(q.ITEM, (info.id, item_id)).fetchone()
    if row is None:
        raise NamespaceError(f"namespace {info.name!r} has no item {item_id}")
    return to_item(row)


def count_items(conn: psycopg.Connection, namespace_id: int, kind: str | None) -> int:
    return int(conn.execute(q.COUNT_ITEMS, (namespace_id, kind, kind)).fetchone()["n"])


def list_items(conn: psycopg.Connection, namespace_id: int, state: str | None, limit: int) -> list[MemoryItem]:
    """Items by descending utility (then id), optionally of one lifecycle state."""
    return [to_item(r) for r in conn.execute(q.LIST_ITEMS, (namespace_id, state, state, limit)).fetchall()]


def hot_items(conn: psycopg.Connection, namespace_id: int) -> list[MemoryItem]:
    """The items resident in hot memory, by id."""
    return send_hot_items(conn, namespace_id)()


def send_hot_items(conn: psycopg.Connection, namespace_id: int) -> Callable[[], list[MemoryItem]]:
    """`hot_items` in two steps: the query is sent now, its rows read by the function returned."""
    cursor = conn.execute(q.HOT_ITEMS, (namespace_id,))
    return lambda: [to_item(r) for r in cursor.fetchall()]


def items_by_ids(conn: psycopg.Connection, item_ids: list[int]) -> list[MemoryItem]:
    return [to_item(r) for r in conn.execute(q.ITEMS_BY_IDS, (item_ids,)).fetchall()]


def items_in_namespace(conn: psycopg.Connection, namespace_id: int, item_ids: list[int]) -> list[MemoryItem]:
    return [to_item(r) for r in conn.execute(q.ITEMS_IN_NAMESPACE, (namespace_id, item_ids)).fetchall()]


def fetch_stats(conn: psycopg.Connection, query: str, params: dict[str, Any]) -> list[tuple[ItemStats, bool]]:
    """Statistics of the items one of the STATS_OF_* queries selects (with `seq` in params for the
    eligible-episode count), each with whether it already has an abstracted rule. Binary tuples:
    consolidation reads thousands of rows per episode."""
    with conn.cursor(row_factory=tuple_row, binary=True) as cursor:
        rows = cursor.execute(query, params).fetchall()
    return [
        (ItemStats(r[0], r[1], r[2], r[3], r[4], frozenset(r[5]), r[6], int(r[11]), r[9], r[10], r[7], r[8]), r[12])
        for r in rows
    ]


@dataclass(frozen=True)
class GateCandidates:
    """The items consolidation reads, one numpy column per statistic (entry i is one item)."""

    ids: np.ndarray  # int64
    utility: np.ndarray
    n_ado: np.ndarray
    distinct_ops: np.ndarray  # distinct operators that adopted the item
    access: np.ndarray  # p of a resident rule
    n_ret_cold: np.ndarray
    eligible_episodes: np.ndarray
    tokens: np.ndarray  # L: of the rule once abstracted, else of the text
    hot: np.ndarray  # bool: resident now
    validated: np.ndarray  # bool: validated before this consolidation
    has_rule: np.ndarray  # bool: abstracted already


_GATE_DTYPES = (np.int64, np.float64, np.int64, np.int64, np.float64, np.float64, np.float64, np.int64,
                np.bool_, np.bool_, np.bool_)


def fetch_gate_candidates(conn: psycopg.Connection, seq: int, namespace_id: int, k_ado: int) -> GateCandidates:
    """Every item of the namespace that is resident, validated, or may have just passed the gate."""
    with conn.cursor(row_factory=tuple_row, binary=True) as cursor:
        arrays = cursor.execute(q.GATE_CANDIDATE_COLUMNS, {"seq": seq, "ns": namespace_id, "k": k_ado}).fetchone()
    assert arrays is not None  # an aggregate always returns its row (of NULLs when nothing matched)
    return GateCandidates(*(np.array(a or [], dtype=t) for a, t in zip(arrays, _GATE_DTYPES, strict=True)))

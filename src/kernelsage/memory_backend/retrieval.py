"""Retrieval: the resident hot rules plus a relevance pool from the vector index, reranked late by the policy."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import psycopg
from langchain_core.embeddings import Embeddings
from psycopg_pool import ConnectionPool

from kernelsage.errors import NamespaceError
from kernelsage.memory_backend import item_rows
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import transaction
from kernelsage.memory_backend.items import MemoryItem, NamespaceInfo, Retrieval, ShownItem
from kernelsage.memory_backend.namespaces import checked_vector, counters
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy
from kernelsage.memory_backend.records import PoolEntry, Stage

Query = str | Sequence[float] | np.ndarray


def hot_rules(conn: psycopg.Connection, namespace_id: int, policy: MemoryPolicy) -> list[MemoryItem]:
    """The resident hot rules (none for policies without hot memory)."""
    return item_rows.hot_items(conn, namespace_id) if policy.uses_hot_memory else []


def relevance_pool(conn: psycopg.Connection, info: NamespaceInfo, query: Sequence[float] | np.ndarray, size: int, *,
                   exclude_resident: bool, ef_search: int) -> list[tuple[MemoryItem, float]]:
    """The `size` items nearest to the query by cosine similarity, nearest first (then by id).

    `exclude_resident` leaves out the hot rules, which policies with hot memory show anyway. The HNSW
    search then scans iteratively so the filter never makes it return fewer rows than asked for.
    """
    vector = checked_vector(query, info.embedding_dim, "the query embedding")
    conn.execute(q.SEARCH_SETTINGS, (str(max(ef_search, size)), "relaxed_order" if exclude_resident else "off"))
    rows = conn.execute(q.nearest_items(info.id, info.embedding_dim, exclude_resident=exclude_resident),
                        {"q": vector, "n": size}).fetchall()
    pool = [(item_rows.to_item({k: v for k, v in r.items() if k != "relevance"}), float(r["relevance"]))
            for r in rows]
    pool.sort(key=lambda pair: (-pair[1], pair[0].id))  # relaxed order must be re-sorted
    return pool


def retrieve(pool: ConnectionPool, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
             embeddings: Embeddings | None, query: Query, *, k: int, stage: Stage,
             rng: random.Random) -> Retrieval:
    """Cold items for a need (relevance pool, reranked late by the policy) plus the resident hot rules."""
    if policy.retrieves and isinstance(query, str):
        if embeddings is None:
            raise NamespaceError("a text query needs the memory to be opened with embeddings")
        query = embeddings.embed_query(query)
    with transaction(pool) as conn:  # one snapshot: the hot set and the pool agree
        version = counters(conn, info)["hot_version"]
        hot = [ShownItem(item=i, tier="hot") for i in hot_rules(conn, info.id, policy)]
        found = relevance_pool(conn, info, query, max(params.pool_size, k),  # type: ignore[arg-type]
                               exclude_resident=policy.uses_hot_memory,
                               ef_search=params.ef_search) if policy.retrieves else []
    by_id = {item.id: item for item, _ in found}
    candidates = [
        PoolEntry(item_id=item.id, relevance=rel, utility=item.utility, q_draft=item.q_draft, q_refine=item.q_refine)
        for item, rel in found
    ]
    ranked = policy.rank(candidates, k=k, stage=stage, params=params, rng=rng)
    cold = [ShownItem(item=by_id[c.item_id], tier="cold", relevance=c.relevance, score=c.score) for c in ranked]
    return Retrieval(cold=cold, hot=hot, hot_version=version)

"""Retrieval: the resident hot rules plus a relevance pool (the vector index, or fused with a lexical ranking:
hybrid.py), reranked late by the policy."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.errors import EpisodeError, NamespaceError
from kernelsage.memory_backend import hybrid, item_rows, ledger, vector_index
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import run_transaction
from kernelsage.memory_backend.items import MemoryItem, NamespaceInfo, Retrieval, ShownItem
from kernelsage.memory_backend.namespaces import send_counters
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy
from kernelsage.memory_backend.records import PoolEntry, Stage
from kernelsage.memory_backend.validation import check_embedding, check_query_text
from kernelsage.memory_backend.vectors import checked_vector

if TYPE_CHECKING:  # only annotations: a memory command must not load the model stack
    from langchain_core.embeddings import Embeddings

Query = str | Sequence[float] | np.ndarray


def hot_rules(conn: psycopg.Connection, namespace_id: int, policy: MemoryPolicy) -> list[MemoryItem]:
    """The resident hot rules (none for policies without hot memory)."""
    return item_rows.hot_items(conn, namespace_id) if policy.uses_hot_memory else []


def relevance_pool(conn: psycopg.Connection, info: NamespaceInfo, query: Sequence[float] | np.ndarray, size: int, *,
                   exclude_resident: bool, probes: int) -> list[tuple[MemoryItem, float]]:
    """The `size` items nearest to the query by cosine similarity, nearest first (then by id).

    The namespace's IVFFlat index reads the `probes` lists nearest to the query (0: as many as
    `vector_index.probes_for` scales with the index; every vector while the namespace is small enough to
    have one list: exact search). `exclude_resident` leaves out the hot rules, which policies with hot
    memory show anyway; the search then reads further lists when the filter would leave fewer rows than
    asked for.
    """
    check_embedding(query, "the query embedding")
    vector = checked_vector(query, info.embedding_dim, "the query embedding")
    if probes == 0:
        probes = vector_index.probes_for(vector_index.current_lists(conn, info.id))
    conn.execute(q.SEARCH_SETTINGS, (str(probes), "relaxed_order" if exclude_resident else "off"))
    rows = conn.execute(q.nearest_items(info.id, info.embedding_dim, exclude_resident=exclude_resident),
                        {"q": vector, "n": size}).fetchall()
    pool = [(item_rows.to_item({k: v for k, v in r.items() if k != "relevance"}), float(r["relevance"]))
            for r in rows]
    pool.sort(key=lambda pair: (-pair[1], pair[0].id))  # relaxed order must be re-sorted
    return pool


def candidate_pool(conn: psycopg.Connection, info: NamespaceInfo, vector: np.ndarray, text: str | None, size: int,
                   params: SageParams, *, exclude_resident: bool,
                   probes: int | None = None) -> list[tuple[MemoryItem, float]]:
    """The relevance pool the policy reranks: by cosine similarity, or with `params.retrieval` "hybrid" and a
    text query, that ranking fused by RRF with the lexical one of the names the text holds (hybrid.py).
    `probes`: the lists to read when already known (default: `params.probes`, see `relevance_pool`)."""
    pool = relevance_pool(conn, info, vector, size, exclude_resident=exclude_resident,
                          probes=params.probes if probes is None else probes)
    if params.retrieval != "hybrid" or not text:
        return pool
    lexical = hybrid.lexical_pool(conn, info, hybrid.query_names(text), size, exclude_resident=exclude_resident)
    return hybrid.fuse_pools(pool, lexical, params.rrf_k, size)


def retrieve(pool: ConnectionPool, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
             embeddings: Embeddings | None, query: Query, *, k: int, stage: Stage, rng: random.Random,
             episode: tuple[str, int] | None = None) -> Retrieval:
    """Cold items for a need (relevance pool, reranked late by the policy) plus the resident hot rules.

    One transaction at REPEATABLE READ: the hot set, its version and the pool come from one snapshot, so
    no rule is ever both hot and cold. With `episode` (episode id, round) what was shown is recorded in
    the retrieval ledger, which that episode's commit is checked against.

    Run in pipeline mode, three round trips: the BEGIN with the reads of the version, the hot rules and
    the index's lists; the search; the ledger's writes with the COMMIT.
    """
    text = query if isinstance(query, str) else None
    if text is not None:
        check_query_text(text)
    if policy.retrieves and text is not None:
        if embeddings is None:
            raise NamespaceError("a text query needs the memory to be opened with embeddings")
        query = embeddings.embed_query(text)
    if policy.retrieves:
        check_embedding(query, "the query embedding")
    vector = checked_vector(query, info.embedding_dim, "the query embedding") if policy.retrieves else None
    if episode is not None:
        ledger.check_round(*episode)
    start = rng.getstate()

    def work(conn: psycopg.Connection) -> Retrieval:
        rng.setstate(start)  # a retried transaction ranks exactly as the first attempt would have
        read_counters = send_counters(conn, info)
        read_hot = item_rows.send_hot_items(conn, info.id) if policy.uses_hot_memory else list
        read_lists = vector_index.send_current_lists(conn, info.id) if vector is not None and not params.probes \
            else None
        version = read_counters()["hot_version"]
        hot = [ShownItem(item=i, tier="hot") for i in read_hot()]
        resident = {s.item.id for s in hot}
        probes = vector_index.probes_for(read_lists()) if read_lists is not None else params.probes
        found = candidate_pool(conn, info, vector, text, max(params.pool_size, k), params,
                               exclude_resident=policy.uses_hot_memory, probes=probes) if vector is not None else []
        found = [(item, rel) for item, rel in found if item.id not in resident]
        by_id = {item.id: item for item, _ in found}
        candidates = [PoolEntry(item_id=item.id, relevance=rel, utility=item.utility, q_draft=item.q_draft,
                                q_refine=item.q_refine) for item, rel in found]
        ranked = policy.rank(candidates, k=k, stage=stage, params=params, rng=rng)
        cold = [ShownItem(item=by_id[c.item_id], tier="cold", relevance=c.relevance, score=c.score) for c in ranked]
        result = Retrieval(cold=cold, hot=hot, hot_version=version)
        if episode is not None:
            ledger.record(conn, info, *episode, version, [(s.item.id, s.tier) for s in result.shown])
        return result

    return run_transaction(pool, work, snapshot=True, pipeline=True)


def show(pool: ConnectionPool, info: NamespaceInfo, policy: MemoryPolicy, episode: tuple[str, int],
         item_ids: list[int]) -> Retrieval:
    """Record that a host showed these items in an episode round (it chose them itself); each item's tier
    is what the store holds now, and the resident rules are shown with them, as a retrieval shows them."""
    ledger.check_round(*episode)

    def work(conn: psycopg.Connection) -> Retrieval:
        read_counters = send_counters(conn, info)
        read_hot = item_rows.send_hot_items(conn, info.id) if policy.uses_hot_memory else list
        version = read_counters()["hot_version"]
        hot = [ShownItem(item=i, tier="hot") for i in read_hot()]
        resident = {s.item.id for s in hot}
        chosen = [i for i in dict.fromkeys(item_ids) if i not in resident]
        items = {i.id: i for i in item_rows.items_in_namespace(conn, info.id, chosen)}
        unknown = [i for i in chosen if i not in items]
        if unknown:
            raise EpisodeError(f"namespace {info.name!r} holds no items {unknown}")
        result = Retrieval(cold=[ShownItem(item=items[i], tier="cold") for i in chosen], hot=hot, hot_version=version)
        ledger.record(conn, info, *episode, version, [(s.item.id, s.tier) for s in result.shown])
        return result

    return run_transaction(pool, work, snapshot=True, pipeline=True)

"""Memory benchmark: retrieval latency and recall, the episode commit, consolidation, and LangGraph's
PostgresStore vector search on the same vectors, all against a fresh embedded PostgreSQL + pgvector.

Prints a table, then one JSON object as the last line. Not a test: figures, not assertions.

    .venv/bin/python bench/memory_bench.py --items 100000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure
from kernelsage.memory_backend.store import MemoryStore

TARGETS = {
    "retrieval_p50_ms": ("<=", 5.0),
    "retrieval_p99_ms": ("<=", 20.0),
    "recall_at_10": (">=", 0.95),
    "commit_p50_ms": ("<=", 10.0),
    "consolidate_ms": ("<=", 100.0),
    "speedup_vs_store_search": (">=", 2.0),
}


def clustered_vectors(count: int, dim: int, rng: np.random.Generator, clusters: int = 500) -> np.ndarray:
    """Unit vectors around a few hundred topics, with a spread that makes neighbours hard to separate."""
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    labels = rng.integers(0, clusters, size=count)
    vectors = centres[labels] + rng.normal(scale=0.6, size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def hard_vectors(count: int, dim: int, rng: np.random.Generator, clusters: int = 200) -> np.ndarray:
    """Well-separated tight clusters (issue 12): default HNSW links few clusters to each other, so a search
    entering the wrong cluster never leaves it. Queries for this set must not be near-duplicates."""
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = rng.integers(0, clusters, size=count)
    vectors = centres[labels] + rng.normal(scale=0.25 / np.sqrt(dim) * 4, size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def timed_ms(run: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


def seed(memory, vectors: np.ndarray, batch: int = 10_000) -> tuple[np.ndarray, float]:
    """Store the vectors in batches; returns their ids (in vector order) and the seconds it took."""
    start = time.perf_counter()
    ids: list[int] = []
    for offset in range(0, len(vectors), batch):
        ids += memory.add_items([
            NewItem(text=f"experience {offset + i}", operator=f"op{(offset + i) % 40}", embedding=v)
            for i, v in enumerate(vectors[offset: offset + batch])
        ])
    return np.asarray(ids), time.perf_counter() - start


def exact_top10(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    return [set(ids[np.argsort(-(vectors @ q))[:10]].tolist()) for q in queries]


def recall(found: list[set[int]], exact: list[set[int]]) -> float:
    return float(np.mean([len(f & e) / 10 for f, e in zip(found, exact, strict=True)]))


def bench_retrieval(memory, exact: list[set[int]], queries: np.ndarray) -> dict[str, float]:
    """The top-10 relevance search (what recall is measured on) and the agent's full retrieval
    (a pool of 40, reranked by utility, plus the hot rules), over the same queries."""
    for query in queries[:20]:  # warm the index pages and the plan cache
        memory.retrieve(query, k=10)
    latencies, found = [], []
    for query in queries:
        start = time.perf_counter()
        pool = memory.relevance_pool(query, size=10)
        latencies.append((time.perf_counter() - start) * 1000)
        found.append({item.id for item, _ in pool})
    full = []
    for query in queries:
        start = time.perf_counter()
        memory.retrieve(query)
        full.append((time.perf_counter() - start) * 1000)
    return {
        "retrieval_p50_ms": percentile(latencies, 50),
        "retrieval_p99_ms": percentile(latencies, 99),
        "recall_at_10": recall(found, exact),
        "retrieve_full_p50_ms": percentile(full, 50),
    }


def bench_commit(memory, ids: np.ndarray, rng: np.random.Generator, repeats: int = 200) -> float:
    """The episode commit alone: what each episode showed is recorded (the retrieval ledger) beforehand."""
    pending = []
    for _ in range(repeats + 1):
        episode_id = uuid.uuid4().hex
        shown = memory.show(episode_id, 1, rng.choice(ids, size=10, replace=False).tolist()).shown
        pending.append(EpisodeTrace(
            episode_id=episode_id, operator=f"op{rng.integers(40)}", t_first=2.0, t_best=1.0,
            exposures=tuple(Exposure(item_id=s.item.id, round=1, tier=s.tier, adopted=n < 3, rationale="bench")
                            for n, s in enumerate(shown)),
        ))

    def commit() -> None:
        memory.commit_episode(pending.pop())

    return percentile(timed_ms(commit, repeats), 50)


def bench_consolidation(store: MemoryStore, dim: int, rng: np.random.Generator, candidates: int) -> dict[str, float]:
    """`candidates` items that pass the validation gate compete for hot memory."""
    memory = store.open(f"bench-ugc-{uuid.uuid4().hex[:8]}", embedding_dim=dim)
    ids = memory.add_items([NewItem(text=f"rule {i}: vectorise the tail loop", embedding=v)
                            for i, v in enumerate(clustered_vectors(candidates, dim, rng))])
    with store.pool.connection() as conn:  # set-up: statistics as after many episodes, without replaying them
        conn.execute(
            "UPDATE ks_items SET utility = 0.05 + random() * 0.5, n_ado = 3 + (random() * 5)::int, "
            "n_ret = 10, n_ret_cold = 10, adopting_ops = '{a,b,c}', eligible_banked = 20 WHERE id = ANY(%s)",
            (ids,),
        )
    start = time.perf_counter()
    first = memory.consolidate()
    first_ms = (time.perf_counter() - start) * 1000
    steady = timed_ms(memory.consolidate, 5)
    return {"consolidate_first_ms": first_ms, "consolidate_ms": statistics.median(steady),
            "hot_rules": len(first.hot), "hot_tokens": first.tokens_used}


def bench_postgres_store(url: str, vectors: np.ndarray, queries: np.ndarray,
                         exact: list[set[int]], ids: np.ndarray) -> dict[str, float]:
    """LangGraph's own PostgresStore, same vectors, same queries (embedding lookups cost nothing)."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import PostgresStore

    by_text = {f"item-{i}": v.tolist() for i, v in enumerate(vectors)}
    by_text.update({f"query-{j}": q.tolist() for j, q in enumerate(queries)})

    def embed(texts: list[str]) -> list[list[float]]:
        return [by_text[t] for t in texts]

    with PostgresStore.from_conn_string(url, index={"dims": vectors.shape[1], "embed": embed,
                                                    "fields": ["text"]}) as pg_store:
        pg_store.setup()
        start = time.perf_counter()
        for offset in range(0, len(vectors), 2_000):
            pg_store.batch([PutOp(("bench",), str(i), {"text": f"item-{i}"})
                            for i in range(offset, min(offset + 2_000, len(vectors)))])
        load_s = time.perf_counter() - start
        for j in range(20):
            pg_store.search(("bench",), query=f"query-{j}", limit=10)
        latencies, found = [], []
        for j in range(len(queries)):
            start = time.perf_counter()
            hits = pg_store.search(("bench",), query=f"query-{j}", limit=10)
            latencies.append((time.perf_counter() - start) * 1000)
            found.append({int(ids[int(hit.key)]) for hit in hits})
    return {"store_search_p50_ms": percentile(latencies, 50), "store_search_p99_ms": percentile(latencies, 99),
            "store_recall_at_10": recall(found, exact), "store_load_s": load_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--candidates", type=int, default=10_000, help="validated items for consolidation")
    parser.add_argument("--ef-search", type=int, default=SageParams().ef_search)
    parser.add_argument("--skip-store", action="store_true", help="skip the PostgresStore comparison")
    parser.add_argument("--ef-sweep", type=lambda text: [int(x) for x in text.split(",")], default=[],
                        help="also measure these hnsw.ef_search values, e.g. 40,64,100")
    parser.add_argument("--data", choices=("easy", "hard"), default="easy",
                        help="easy: overlapping topics, near-duplicate queries; hard: separated clusters, queries "
                             "near stored points but not duplicates (defeats default HNSW)")
    args = parser.parse_args()

    rng = np.random.default_rng(2026)
    hard = args.data == "hard"
    vectors = (hard_vectors if hard else clustered_vectors)(args.items, args.dim, rng)
    # Queries: new points near existing items, as a task description lands near related experiences.
    picks = vectors[rng.integers(0, args.items, size=args.queries)]
    queries = picks + rng.normal(scale=(1.0 / np.sqrt(args.dim)) if hard else 0.02,
                                 size=picks.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    with tempfile.TemporaryDirectory(prefix="kernelsage-bench-") as data_dir:
        url = embedded_database_url(Path(data_dir))
        store = MemoryStore(open_pool(url), params=SageParams(ef_search=args.ef_search), owns_pool=True)
        memory = store.open("bench", embedding_dim=args.dim)
        ids, seed_s = seed(memory, vectors)
        with store.pool.connection() as conn:
            conn.execute("ANALYZE ks_items, ks_item_vectors")
        results: dict[str, float] = {"items": args.items, "dim": args.dim, "ef_search": args.ef_search,
                                     "seed_s": seed_s}
        exact = exact_top10(vectors, ids, queries)
        results |= bench_retrieval(memory, exact, queries)
        for ef in args.ef_sweep:
            sweep = MemoryStore(store.pool, params=SageParams(ef_search=ef)).open("bench")
            measured = bench_retrieval(sweep, exact, queries)
            results[f"ef{ef}_p50_ms"] = measured["retrieval_p50_ms"]
            results[f"ef{ef}_recall_at_10"] = measured["recall_at_10"]
        results["commit_p50_ms"] = bench_commit(memory, ids, rng)
        results |= bench_consolidation(store, args.dim, rng, args.candidates)
        if not args.skip_store:
            results |= bench_postgres_store(url, vectors, queries, exact, ids)
            results["speedup_vs_store_search"] = results["store_search_p50_ms"] / results["retrieval_p50_ms"]
        store.close()

    table = Table(title=f"kernelsage memory benchmark ({args.items} items, dim {args.dim})")
    for column in ("measure", "value", "target", "met"):
        table.add_column(column)
    for key, value in results.items():
        target = TARGETS.get(key)
        met = ""
        if target:
            op, bound = target
            met = "yes" if (value <= bound if op == "<=" else value >= bound) else "NO"
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value),
                      f"{target[0]} {target[1]}" if target else "", met)
    Console().print(table)
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in results.items()}))


if __name__ == "__main__":
    main()

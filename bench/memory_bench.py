"""Memory benchmark: retrieval latency and recall on two data sets, the episode commit, consolidation, and
LangGraph's PostgresStore vector search on the same vectors, all against a fresh embedded PostgreSQL + pgvector.

Data sets: `easy` (overlapping topics, queries that nearly duplicate a stored item) and `hard` (well-separated
tight clusters, queries near a stored item but not duplicates: default HNSW finds none of the true top 10
for about half of them). Prints a table, then one JSON object as the last line. Not a test: figures.

    .venv/bin/python bench/memory_bench.py --items 100000
    .venv/bin/python bench/memory_bench.py --items 20000 --data hard --hnsw-baseline --skip-store
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
import psycopg
from psycopg.conninfo import make_conninfo
from rich.console import Console
from rich.table import Table

from kernelsage.memory_backend import vector_index
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure
from kernelsage.memory_backend.store import MemoryStore

TARGETS = {  # by the measure's name after its data-set prefix
    "retrieval_p50_ms": ("<=", 10.0),  # at 100K items; 25 ms at 1M
    "recall_at_10": (">=", 0.95),
    "commit_p50_ms": ("<=", 10.0),
    "consolidate_ms": ("<=", 100.0),  # p50, right after an ordinary episode commit, at 10K validated items
}
HARD_CLUSTER_SIZE = 100  # items per cluster of the hard set
HARD_SPREAD = 0.05  # a cluster's radius (norm of an item's offset from its centre)
HARD_QUERY_OFFSET = 1.5  # norm of a query's offset from the item it starts from, before normalising


def clustered_vectors(count: int, dim: int, rng: np.random.Generator, clusters: int = 500) -> np.ndarray:
    """Unit vectors around a few hundred topics, with a spread that makes neighbours hard to separate."""
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    labels = rng.integers(0, clusters, size=count)
    vectors = centres[labels] + rng.normal(scale=0.6, size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def hard_vectors(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Tight clusters of about HARD_CLUSTER_SIZE items around random (so nearly orthogonal) centres: the
    clusters are far apart and equally far from each other, so a graph search has no gradient to follow
    from one to the next, and HNSW's neighbour lists hold few links between clusters."""
    clusters = max(1, count // HARD_CLUSTER_SIZE)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    offsets = rng.normal(scale=HARD_SPREAD / np.sqrt(dim), size=(count, dim)).astype(np.float32)
    vectors = centres[rng.integers(0, clusters, size=count)] + offsets
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def queries_for(vectors: np.ndarray, count: int, rng: np.random.Generator, *, hard: bool) -> np.ndarray:
    """New points near stored items, as a task description lands near related experiences. Easy: almost
    duplicates (cosine about 0.99). Hard: cosine about 0.55 to the item they start from, so their true
    neighbours are decided by small differences within a cluster."""
    picks = vectors[rng.integers(0, len(vectors), size=count)]
    scale = HARD_QUERY_OFFSET / np.sqrt(vectors.shape[1]) if hard else 0.02
    queries = picks + rng.normal(scale=scale, size=picks.shape).astype(np.float32)
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)


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
    """Store the vectors in batches; returns their ids (in vector order) and the seconds it took, index
    builds included."""
    start = time.perf_counter()
    ids: list[int] = []
    for offset in range(0, len(vectors), batch):
        ids += memory.add_items([
            NewItem(text=f"experience {offset + i}", operator=f"op{(offset + i) % 40}", embedding=v)
            for i, v in enumerate(vectors[offset: offset + batch])
        ])
    memory.store.index_builds.wait()  # the index the data calls for, built in the background meanwhile
    return np.asarray(ids), time.perf_counter() - start


def exact_top10(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    """The true top 10 of each query by exact cosine similarity (the vectors are unit length)."""
    return [set(ids[np.argpartition(-(vectors @ q), 10)[:10]].tolist()) for q in queries]


def recall(found: list[set[int]], exact: list[set[int]]) -> float:
    return float(np.mean([len(f & e) / 10 for f, e in zip(found, exact, strict=True)]))


def misses(found: list[set[int]], exact: list[set[int]]) -> int:
    """Queries that found none of their true top 10."""
    return sum(not (f & e) for f, e in zip(found, exact, strict=True))


def bench_retrieval(memory, exact: list[set[int]], queries: np.ndarray) -> dict[str, float]:
    """The top-10 relevance search (what recall is measured on) and the agent's full retrieval
    (a pool of 40, reranked by utility, plus the hot rules), over the same queries."""
    for query in queries:  # warm: the pages these queries read in memory, as on a server in use
        memory.relevance_pool(query, size=10)
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
        "recall_at_10": recall(found, exact),
        "queries_missing_all_10": misses(found, exact),
        "retrieval_p50_ms": percentile(latencies, 50),
        "retrieval_p95_ms": percentile(latencies, 95),
        "retrieval_p99_ms": percentile(latencies, 99),
        "retrieve_full_p50_ms": percentile(full, 50),
    }


def bench_hnsw_baseline(store: MemoryStore, memory, exact: list[set[int]], queries: np.ndarray,
                        ef_search: int = 100) -> dict[str, float]:
    """Default HNSW (m 16, ef_construction 64) in place of the namespace's index, inside a transaction
    that is rolled back: what the store searched with before, on the same vectors and queries."""
    info = memory.info
    column = f"embedding::vector({info.embedding_dim})"
    found = []
    with store.pool.connection() as conn, conn.transaction(force_rollback=True):
        for index in conn.execute("SELECT indexrelid::regclass::text AS name FROM pg_index i JOIN pg_class c "
                                  "ON c.oid = i.indexrelid WHERE starts_with(c.relname, %s)",
                                  (f"ks_item_vectors_ivf_ns{info.id}_l",)).fetchall():
            conn.execute(f"DROP INDEX {index['name']}")
        conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
        conn.execute(f"CREATE INDEX bench_hnsw ON ks_item_vectors USING hnsw (({column}) vector_cosine_ops) "
                     f"WHERE namespace_id = {info.id}")
        conn.execute(f"SET LOCAL hnsw.ef_search = {ef_search}")
        for query in queries:
            rows = conn.execute(f"SELECT item_id FROM ks_item_vectors WHERE namespace_id = {info.id} "
                                f"ORDER BY {column} <=> %s LIMIT 10", (query,)).fetchall()
            found.append({r["item_id"] for r in rows})
    return {f"hnsw_ef{ef_search}_recall_at_10": recall(found, exact),
            f"hnsw_ef{ef_search}_queries_missing_all_10": misses(found, exact)}


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


def bench_consolidation(store: MemoryStore, dim: int, rng: np.random.Generator, candidates: int,
                        episodes: int = 40, full_read: bool = False) -> dict[str, float]:
    """`candidates` items that pass the validation gate compete for hot memory. Timed: the first
    consolidation (a full read; it abstracts and promotes), then one consolidation right after each of
    `episodes` ordinary episode commits (a retrieval shows the resident rules and 6 cold items, two of
    them adopted; the incremental read), then consolidations with nothing committed in between.
    `full_read` drops the store's candidate cache before each: every consolidation reads every candidate,
    as before the incremental read (for a side-by-side comparison)."""
    vectors = clustered_vectors(candidates, dim, rng)
    memory = store.open(f"bench-ugc-{uuid.uuid4().hex[:8]}", embedding_dim=dim)
    ids = memory.add_items([NewItem(text=f"rule {i}: vectorise the tail loop", embedding=v)
                            for i, v in enumerate(vectors)])
    with store.pool.connection() as conn:  # set-up: statistics as after many episodes, without replaying them
        conn.execute(
            "UPDATE ks_items SET utility = 0.05 + random() * 0.5, n_ado = 3 + (random() * 5)::int, "
            "n_ret = 10, n_ret_cold = 10, adopting_ops = '{a,b,c}', eligible_banked = 20 WHERE id = ANY(%s)",
            (ids,),
        )
    start = time.perf_counter()
    first = memory.consolidate()
    first_ms = (time.perf_counter() - start) * 1000
    after_commit, swapped = [], []
    for n in range(episodes):
        episode_id = uuid.uuid4().hex
        shown = memory.retrieve(vectors[rng.integers(len(vectors))], episode_id=episode_id, round=1).shown
        memory.commit_episode(EpisodeTrace(
            episode_id=episode_id, operator=f"op{n % 40}", t_first=2.0, t_best=1.0,
            exposures=tuple(Exposure(item_id=s.item.id, round=1, tier=s.tier, adopted=k < 2, rationale="bench")
                            for k, s in enumerate(shown))))
        if full_read:
            store.candidate_caches.put(memory.info.id, None)
        start = time.perf_counter()
        result = memory.consolidate()
        after_commit.append((time.perf_counter() - start) * 1000)
        swapped.append(len(result.promoted) + len(result.demoted))
    steady = timed_ms(memory.consolidate, 5)
    return {"consolidate_first_ms": first_ms, "consolidate_ms": percentile(after_commit, 50),
            "consolidate_after_commit_p99_ms": percentile(after_commit, 99),
            "consolidate_after_commit_max_ms": max(after_commit),
            "consolidate_swapped_p50": percentile(swapped, 50), "consolidate_unchanged_ms": statistics.median(steady),
            "hot_rules": len(first.hot), "hot_tokens": first.tokens_used}


def bench_postgres_store(url: str, name: str, vectors: np.ndarray, queries: np.ndarray,
                         exact: list[set[int]], ids: np.ndarray) -> dict[str, float]:
    """LangGraph's own PostgresStore, same vectors, same queries (embedding lookups cost nothing)."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import PostgresStore

    by_text = {f"item-{i}": v.tolist() for i, v in enumerate(vectors)}
    by_text.update({f"query-{j}": q.tolist() for j, q in enumerate(queries)})

    def embed(texts: list[str]) -> list[list[float]]:
        return [by_text[t] for t in texts]

    with psycopg.connect(url, autocommit=True) as admin:  # a database of its own: no other vectors in its index
        admin.execute(f"CREATE DATABASE store_{name}")
    url = make_conninfo(url, dbname=f"store_{name}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    with PostgresStore.from_conn_string(url, index={"dims": vectors.shape[1], "embed": embed,
                                                    "fields": ["text"]}) as pg_store:
        pg_store.setup()
        start = time.perf_counter()
        for offset in range(0, len(vectors), 2_000):
            pg_store.batch([PutOp((name,), str(i), {"text": f"item-{i}"})
                            for i in range(offset, min(offset + 2_000, len(vectors)))])
        load_s = time.perf_counter() - start
        for j in range(20):
            pg_store.search((name,), query=f"query-{j}", limit=10)
        latencies, found = [], []
        for j in range(len(queries)):
            start = time.perf_counter()
            hits = pg_store.search((name,), query=f"query-{j}", limit=10)
            latencies.append((time.perf_counter() - start) * 1000)
            found.append({int(ids[int(hit.key)]) for hit in hits})
    return {"store_search_p50_ms": percentile(latencies, 50), "store_search_p95_ms": percentile(latencies, 95),
            "store_recall_at_10": recall(found, exact), "store_load_s": load_s}


def bench_data_set(store: MemoryStore, url: str, name: str, args: argparse.Namespace,
                   rng: np.random.Generator) -> dict[str, float]:
    """Seed a namespace with one data set, then measure retrieval on it (and optionally the baselines)."""
    hard = name == "hard"
    vectors = (hard_vectors if hard else clustered_vectors)(args.items, args.dim, rng)
    queries = queries_for(vectors, args.queries, rng, hard=hard)
    memory = store.open(f"bench-{name}", embedding_dim=args.dim)
    ids, seed_s = seed(memory, vectors)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE ks_items, ks_item_vectors")
    with store.pool.connection() as conn:
        lists = vector_index.current_lists(conn, memory.info.id)
    results: dict[str, float] = {"seed_s": seed_s, "index_lists": lists}
    exact = exact_top10(vectors, ids, queries)
    results |= bench_retrieval(memory, exact, queries)
    for probes in args.probe_sweep:
        sweep = MemoryStore(store.pool, params=SageParams(probes=probes)).open(memory.name)
        measured = bench_retrieval(sweep, exact, queries)
        for key in ("recall_at_10", "retrieval_p50_ms", "retrieval_p95_ms"):
            results[f"probes{probes}_{key}"] = measured[key]
    if args.hnsw_baseline:
        results |= bench_hnsw_baseline(store, memory, exact, queries)
    if not args.skip_store:
        results |= bench_postgres_store(url, name, vectors, queries, exact, ids)
        results["speedup_vs_store_search"] = results["store_search_p50_ms"] / results["retrieval_p50_ms"]
    results["_ids"] = ids  # type: ignore[assignment]  # for the commit benchmark; not printed
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--candidates", type=int, default=10_000, help="validated items for consolidation")
    parser.add_argument("--episodes", type=int, default=40, help="commits, each followed by a timed consolidation")
    parser.add_argument("--consolidation-only", action="store_true", help="measure consolidation alone")
    parser.add_argument("--full-read", action="store_true",
                        help="consolidation reads every candidate each time (no incremental read): for comparison")
    parser.add_argument("--probes", type=int, default=SageParams().probes,
                        help="IVFFlat lists read per search: more is slower and finds more")
    parser.add_argument("--skip-store", action="store_true", help="skip the PostgresStore comparison")
    parser.add_argument("--probe-sweep", type=lambda text: [int(x) for x in text.split(",")], default=[],
                        help="also measure these probe counts, e.g. 1,2,8")
    parser.add_argument("--hnsw-baseline", action="store_true",
                        help="also measure default HNSW (ef_search 100) on the same vectors")
    parser.add_argument("--data", choices=("easy", "hard", "both"), default="both",
                        help="easy: overlapping topics, near-duplicate queries; hard: separated clusters, queries "
                             "near stored points but not duplicates (defeats default HNSW)")
    args = parser.parse_args()

    rng = np.random.default_rng(2026)
    data_sets = ("easy", "hard") if args.data == "both" else (args.data,)
    results: dict[str, float] = {"items": args.items, "dim": args.dim, "probes": args.probes}
    with tempfile.TemporaryDirectory(prefix="kernelsage-bench-") as data_dir:
        url = embedded_database_url(Path(data_dir))
        store = MemoryStore(open_pool(url), params=SageParams(probes=args.probes), owns_pool=True)
        if not args.consolidation_only:
            measured = {name: bench_data_set(store, url, name, args, rng) for name in data_sets}
            ids = measured[data_sets[0]].pop("_ids")
            for name, figures in measured.items():
                figures.pop("_ids", None)
                results |= {f"{name}_{key}": value for key, value in figures.items()}
            results["commit_p50_ms"] = bench_commit(store.open(f"bench-{data_sets[0]}"), ids, rng)
        results |= bench_consolidation(store, args.dim, rng, args.candidates, args.episodes, args.full_read)
        store.close()

    table = Table(title=f"kernelsage memory benchmark ({args.items} items, dim {args.dim})")
    for column in ("measure", "value", "target", "met"):
        table.add_column(column)
    for key, value in results.items():
        target = TARGETS.get(key.split("_", 1)[1] if key.startswith(("easy_", "hard_")) else key)
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

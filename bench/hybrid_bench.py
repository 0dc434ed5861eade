"""Hybrid retrieval benchmark: recall@10 and latency of vector-only vs hybrid (vector + names, fused by RRF)
on queries that are compiler error texts and API names, each naming one known item, against a fresh
embedded PostgreSQL + pgvector.

Items are kernel experiences with the offline MiniLM embeddings, written from a few templates around
synthetic API names (DataCopyPad, DataCopyPadV2, _mm256_fmadd_ps, ...): neighbouring names differ by a
suffix, and every item also holds common names (LocalTensor, float16, __aicore__) that queries repeat.
Each query names one item's own API; that item is the right answer. Retrieval is the agent's (the relevance
pool of 40, ranked by relevance alone: the static policy), k = 10. Not a test: figures.

    .venv/bin/python bench/hybrid_bench.py --items 10000
    .venv/bin/python bench/hybrid_bench.py --items 100000 --queries 300 --cache /tmp/hybrid-cache
    .venv/bin/python bench/hybrid_bench.py --items 100000 --beside 20000 --cache /tmp/hybrid-cache

`--beside N` first stores N of the same items in another namespace, so the measured namespace shares the
tables (and, before migration 7, every common name's index entries) with it, its rows stored after.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.embeddings import LocalMiniLMEmbeddings
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore

HEADS = ["Data", "Copy", "Reduce", "Gather", "Scatter", "Cast", "Broadcast", "Transpose", "Select", "Compare",
         "Muls", "Adds", "Exp", "Ln", "Sqrt", "Max", "Min", "Sum", "Mean", "Pad", "Tile", "Queue", "Buf", "Pipe"]
TAILS = ["", "V2", "V3", "Ex", "Async", "Pad", "Tail", "Align", "Block", "Mask"]
INTRIN_OPS = ["fmadd", "fmsub", "add", "mul", "max", "min", "loadu", "storeu", "blend", "permute", "cvtph", "hadd"]
INTRIN_TYPES = ["ps", "pd", "epi32", "epi16", "si256", "ph"]
COMMON = "LocalTensor<float16> in a TQue on the __aicore__ kernel"
TEXTS = [
    "Use {name} when the tail is not aligned to 32 bytes; {common}.",
    "Replace the scalar loop with {name} over the whole tile; {common}.",
    "{name} needs its operands in the unified buffer first; {common}.",
    "Call {name} once per block rather than per element; {common}.",
]
ERRORS = [
    "kernel.cpp:{line}:9: error: use of undeclared identifier '{name}'",
    "kernel.cpp:{line}:5: error: no member named '{name}' in namespace 'AscendC'",
    "kernel.cpp:{line}:3: error: no matching function for call to '{name}(LocalTensor<float16>&, int)'",
    "{name}",
]


def api_names(count: int, rng: np.random.Generator) -> list[str]:
    """`count` distinct names: CamelCase Ascend-C-like APIs and x86 intrinsics, many a suffix apart."""
    names: dict[str, None] = {}
    while len(names) < count:
        if rng.random() < 0.3:
            width = rng.choice(["_mm", "_mm256", "_mm512"])
            name = f"{width}_{rng.choice(INTRIN_OPS)}{rng.integers(0, 40)}_{rng.choice(INTRIN_TYPES)}"
        else:
            name = "".join(rng.choice(HEADS, size=int(rng.integers(2, 4)))) + rng.choice(TAILS)
        names[name] = None
    return list(names)


def corpus(count: int, rng: np.random.Generator) -> tuple[list[str], list[str], list[str]]:
    """Item texts, their evidence and the API each names."""
    names = api_names(count, rng)
    texts = [TEXTS[i % len(TEXTS)].format(name=n, common=COMMON) for i, n in enumerate(names)]
    evidence = [f"episode e{i}: " + ERRORS[i % 3].format(line=i % 200, name=n) for i, n in enumerate(names)]
    return texts, evidence, names


class Precomputed(Embeddings):
    """Query vectors computed before the timing, so latency is the database's, not the model's."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]


def embed(texts: list[str], cache: Path | None, key: str) -> np.ndarray:
    path = cache / f"{key}.npy" if cache else None
    if path is not None and path.exists():
        return np.load(path)
    vectors = np.asarray(LocalMiniLMEmbeddings().embed_documents(texts), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def random_unit(count: int, rng: np.random.Generator, dim: int = LocalMiniLMEmbeddings.dimension) -> np.ndarray:
    vectors = rng.normal(size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def measure(store: MemoryStore, namespace: str, embeddings: Embeddings, queries: list[str], truth: list[int],
            retrieval: str, passes: int) -> dict[str, object]:
    memory = store.open(namespace, embeddings=embeddings, policy="static",
                        params=SageParams(retrieval=retrieval, top_k=10))
    for query in queries:  # warm: the pages these queries read in memory, as on a server in use
        memory.retrieve(query, k=10)
    hits, p50s, p95s, samples = [], [], [], []
    for _ in range(passes):
        samples = []
        hits = []
        for query, right in zip(queries, truth, strict=True):
            start = time.perf_counter()
            found = memory.retrieve(query, k=10).cold
            samples.append((time.perf_counter() - start) * 1000)
            hits.append(right in {s.item.id for s in found})
        p50s.append(float(np.percentile(samples, 50)))
        p95s.append(float(np.percentile(samples, 95)))
    kinds = ["undeclared", "no_member", "no_matching_call", "name_only"]
    per_kind = {kind: float(np.mean(hits[i::len(ERRORS)])) for i, kind in enumerate(kinds)}
    p50_by_kind = {kind: round(float(np.percentile(samples[i::len(ERRORS)], 50)), 2)
                   for i, kind in enumerate(kinds)}  # the last pass's
    boot = np.random.default_rng(0).choice(np.asarray(hits, dtype=float), size=(2000, len(hits))).mean(axis=1)
    return {"recall_at_10": float(np.mean(hits)), "recall_ci95": [float(np.percentile(boot, 2.5)),
                                                                  float(np.percentile(boot, 97.5))],
            "recall_by_query": per_kind, "p50_ms_by_query_last_pass": p50_by_kind,
            "p50_ms_per_pass": [round(p, 2) for p in p50s],
            "p95_ms_per_pass": [round(p, 2) for p in p95s]}


def load(memory, texts: list[str], evidence: list[str], vectors: np.ndarray) -> list[int]:
    """The items stored in batches of 10,000; their ids."""
    ids: list[int] = []
    for offset in range(0, len(texts), 10_000):
        ids += memory.add_items([NewItem(text=t, evidence=e, embedding=v.tolist()) for t, e, v in
                                 zip(texts[offset:offset + 10_000], evidence[offset:offset + 10_000],
                                     vectors[offset:offset + 10_000], strict=True)])
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200, help="a multiple of 4 (the four query kinds)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the queries (p50 spread)")
    parser.add_argument("--cache", type=Path, default=None, help="keep the item embeddings here between runs")
    parser.add_argument("--vectors", choices=("minilm", "random"), default="minilm",
                        help="random: unit vectors in 384 dimensions instead of embeddings (the lexical side and "
                             "the latency are measured; the vector ranking, hence its recall, is meaningless)")
    parser.add_argument("--beside", type=int, default=0,
                        help="store this many of the items in another namespace first (at most --items)")
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    texts, evidence, names = corpus(args.items, rng)
    started = time.perf_counter()
    vectors = embed(texts, args.cache, f"items-{args.items}") if args.vectors == "minilm" else \
        random_unit(args.items, np.random.default_rng(1))
    embed_s = time.perf_counter() - started
    targets = rng.choice(args.items, size=args.queries, replace=False)
    queries = [ERRORS[n % len(ERRORS)].format(line=int(t) % 97, name=names[t]) for n, t in enumerate(targets)]
    query_vectors = LocalMiniLMEmbeddings().embed_documents(queries) if args.vectors == "minilm" else \
        random_unit(len(queries), np.random.default_rng(2)).tolist()
    embeddings = Precomputed(dict(zip(queries, query_vectors, strict=True)))
    results: dict[str, object] = {"items": args.items, "beside": args.beside, "vectors": args.vectors,
                                  "queries": args.queries,
                                  "embed_s": round(embed_s, 1)}
    with tempfile.TemporaryDirectory(prefix="kernelsage-hybrid-") as data_dir:
        store = MemoryStore(open_pool(embedded_database_url(Path(data_dir))), owns_pool=True)
        started = time.perf_counter()
        if args.beside:
            load(store.open("bench-hybrid-beside", embedding_dim=vectors.shape[1]), texts[:args.beside],
                 evidence[:args.beside], vectors[:args.beside])
        ids = load(store.open("bench-hybrid", embedding_dim=vectors.shape[1]), texts, evidence, vectors)
        store.index_builds.wait()
        results["load_s"] = round(time.perf_counter() - started, 1)
        with store.pool.connection() as conn:  # the lexical table with its indexes (both namespaces)
            results["lexical_mb"] = float(conn.execute(
                "SELECT round(pg_total_relation_size(coalesce(to_regclass('ks_item_names'), "
                "to_regclass('ks_item_lexemes'))) / 1048576.0, 1) AS mb").fetchone()["mb"])
        truth = [ids[t] for t in targets]
        for retrieval in ("vector", "hybrid"):
            results[retrieval] = measure(store, "bench-hybrid", embeddings, queries, truth, retrieval, args.passes)
            print(retrieval, json.dumps(results[retrieval]), flush=True)
        store.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()

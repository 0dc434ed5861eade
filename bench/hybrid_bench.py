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

`--corpus apis` measures names as kernel engineers write them instead: lessons about 140 real API names of
four kinds (CamelCase Ascend C APIs such as `WholeReduceSum`, single-word ones such as `Muls` and `Exp`, dotted
Triton names such as `tl.cumsum`, x86 intrinsics), each lesson naming its API and one other of the same kind
(so an exact name alone does not single out the lessons about it), and queries that are compiler or runtime
error texts naming one API. A query hits when any lesson about its API is among the 10 returned (hit@10),
reported per kind of name:

    .venv/bin/python bench/hybrid_bench.py --corpus apis --items 10000 --queries 132 --cache /tmp/hybrid-cache
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


# Real API names, by the kind of name a kernel engineer writes (the kinds the name rule must cover). Two-letter
# ones (Ln, Or) and prose words (And, Not, Select) are kept: they are as real, and the hardest.
_API_NAMES = {
    "camel": "DataCopy DataCopyPad ReduceMax ReduceSum ReduceMin WholeReduceSum WholeReduceMax BlockReduceSum "
             "PairReduceSum InitBuffer AllocTensor FreeTensor EnQue DeQue SetGlobalBuffer GetBlockIdx PipeBarrier "
             "SetFlag WaitFlag TransDataTo5HD LoadData CompareScalar GetValue SetValue SetBlockDim GetBlockNum "
             "SetMaskCount ResetMask SetVectorMask LocalTensor GlobalTensor TBuf TQue TPipe",
    "single": "Muls Adds Exp Ln Abs Cast Relu Sqrt Rsqrt Reciprocal Duplicate Maxs Mins Not Select Compare "
              "Gather Scatter Sort Axpy Brcb Transpose Mmad Fixpipe Sub Mul Div Add Max Min And Or "
              "Tanh Sigmoid Erf",
    "dotted": "tl.dot tl.cumsum tl.load tl.store tl.arange tl.program_id tl.sum tl.max tl.exp tl.where tl.zeros "
              "tl.full tl.atomic_add tl.reshape tl.trans tl.sqrt tl.sigmoid tl.maximum tl.minimum tl.broadcast_to "
              "tl.static_range tl.multiple_of tl.max_contiguous tl.make_block_ptr tl.advance tl.associative_scan "
              "tl.histogram tl.split tl.join tl.interleave tl.cast tl.abs tl.log tl.fma tl.argmax",
    "underscore": "_mm256_fmadd_ps _mm256_loadu_ps _mm256_storeu_ps _mm512_reduce_add_ps _mm256_max_ps "
                  "_mm256_set1_ps _mm256_hadd_ps _mm256_permute2f128_ps _mm_prefetch _mm256_cvtph_ps "
                  "_mm512_fmadd_ps _mm512_loadu_ps _mm512_mask_storeu_ps _mm256_blendv_ps _mm256_mul_ps "
                  "_mm256_add_ps _mm256_rsqrt_ps _mm256_exp_ps _mm512_max_ps _mm256_cmp_ps _mm256_and_ps "
                  "_mm256_setzero_ps _mm512_setzero_ps _mm256_i32gather_ps _mm512_permutexvar_ps "
                  "_mm256_castps256_ps128 _mm_cvtss_f32 _mm256_extractf128_ps _mm_hadd_ps _mm_add_ss "
                  "_mm512_reduce_max_ps _mm256_fnmadd_ps _mm256_sub_ps _mm256_div_ps",
}
API_KINDS = {kind: names.split() for kind, names in _API_NAMES.items()}
LESSONS = [
    "When {op} on {dtype} tiles fails to compile, call {api} with the operand order of the docs, not {other}.",
    "{api} needs its operands in the unified buffer first; {other} does not, so reorder the copies for {op}.",
    "For {op} with a tail not aligned to 32 bytes, {api} gives wrong values at the tail; {other} handles it.",
    "Replace the scalar loop of {op} with {api} over the whole tile, and keep {other} for the reduction.",
    "{op} on {dtype}: {api} and {other} both work, but {api} halves the time once the tile fits the buffer.",
]
API_ERRORS = {
    "camel": ["kernel.cpp:{line}:9: error: no member named '{api}' in namespace 'AscendC'",
              "kernel.cpp:{line}:3: error: no matching function for call to '{api}'",
              "[ERROR] {api}: the address of the destination tensor is not 32-byte aligned"],
    "single": ["kernel.cpp:{line}:5: error: no matching function for call to '{api}'",
               "kernel.cpp:{line}:9: error: use of undeclared identifier '{api}'",
               "[ERROR] {api} failed: repeat times exceed 255 for the given count"],
    "dotted": ["triton.compiler.errors.CompilationError: at {line}:8: {api} got incompatible shapes",
               "TypeError: {api}() got an unexpected keyword argument 'axis'",
               "ValueError: unsupported dtype for {api}: fp64"],
    "underscore": ["kernel.cpp:{line}:12: error: '{api}' was not declared in this scope",
                   "kernel.cpp:{line}:7: error: inlining failed in call to 'always_inline' '{api}': target specific "
                   "option mismatch"],
}
OPERATORS = ["softmax", "layer norm", "RMS norm", "matmul", "top-k", "cumsum", "GELU", "add", "ReLU", "attention"]
DTYPES = ["float16", "float32", "bfloat16", "int8"]


def api_corpus(count: int, rng: np.random.Generator) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Lessons about real API names, their evidence, and the (kind, API) each is about."""
    about = [(kind, api) for kind, apis in API_KINDS.items() for api in apis]
    texts, evidence, labels = [], [], []
    for n in range(count):
        kind, api = about[n % len(about)]
        others = [a for a in API_KINDS[kind] if a != api]
        other = others[int(rng.integers(len(others)))]
        op, dtype = OPERATORS[int(rng.integers(len(OPERATORS)))], DTYPES[int(rng.integers(len(DTYPES)))]
        texts.append(LESSONS[n % len(LESSONS)].format(api=api, other=other, op=op, dtype=dtype))
        evidence.append(f"episode e{n}: {op} on {dtype}")
        labels.append((kind, api))
    return texts, evidence, labels


def api_queries(labels: list[tuple[str, str]], count: int, rng: np.random.Generator) -> list[tuple[str, str, str]]:
    """`count` error texts (query, kind, API), as many of each kind of name."""
    apis = sorted(set(labels))
    by_kind = {kind: [a for k, a in apis if k == kind] for kind in API_KINDS}
    queries = []
    for n in range(count):
        kind = list(API_KINDS)[n % len(API_KINDS)]
        api = by_kind[kind][int(rng.integers(len(by_kind[kind])))]
        template = API_ERRORS[kind][int(rng.integers(len(API_ERRORS[kind])))]
        queries.append((template.format(api=api, line=int(rng.integers(5, 200))), kind, api))
    return queries


def measure_hits(store: MemoryStore, namespace: str, embeddings: Embeddings, queries: list[tuple[str, str, str]],
                 about: dict[int, str], retrieval: str, passes: int) -> dict[str, object]:
    """hit@10 (any lesson about the query's API among the 10) overall and per kind of name, and latency."""
    memory = store.open(namespace, embeddings=embeddings, policy="static",
                        params=SageParams(retrieval=retrieval, top_k=10))
    for query, _, _ in queries:
        memory.retrieve(query, k=10)
    p50s, p95s, hits = [], [], []
    for _ in range(passes):
        samples, hits = [], []
        for query, _, api in queries:
            start = time.perf_counter()
            found = memory.retrieve(query, k=10).cold
            samples.append((time.perf_counter() - start) * 1000)
            hits.append(any(about.get(s.item.id) == api for s in found))
        p50s.append(round(float(np.percentile(samples, 50)), 2))
        p95s.append(round(float(np.percentile(samples, 95)), 2))
    by_kind = {kind: round(float(np.mean([h for h, (_, k, _) in zip(hits, queries, strict=True) if k == kind])), 3)
               for kind in API_KINDS}
    return {"hit_at_10": round(float(np.mean(hits)), 3), "hit_at_10_by_kind": by_kind,
            "p50_ms_per_pass": p50s, "p95_ms_per_pass": p95s}


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
    parser.add_argument("--corpus", choices=("synthetic", "apis"), default="synthetic",
                        help="synthetic: one item per made-up API name, recall@10; apis: lessons about 140 real "
                             "API names of four kinds, hit@10 per kind")
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
    if args.corpus == "apis":
        texts, evidence, labels = api_corpus(args.items, rng)
        api_queries_ = api_queries(labels, args.queries, rng)
        queries = [q for q, _, _ in api_queries_]
    else:
        texts, evidence, names = corpus(args.items, rng)
        targets = rng.choice(args.items, size=args.queries, replace=False)
        queries = [ERRORS[n % len(ERRORS)].format(line=int(t) % 97, name=names[t]) for n, t in enumerate(targets)]
    started = time.perf_counter()
    vectors = embed(texts, args.cache, f"{args.corpus}-items-{args.items}") if args.vectors == "minilm" else \
        random_unit(args.items, np.random.default_rng(1))
    embed_s = time.perf_counter() - started
    query_vectors = LocalMiniLMEmbeddings().embed_documents(queries) if args.vectors == "minilm" else \
        random_unit(len(queries), np.random.default_rng(2)).tolist()
    embeddings = Precomputed(dict(zip(queries, query_vectors, strict=True)))
    results: dict[str, object] = {"corpus": args.corpus, "items": args.items, "beside": args.beside,
                                  "vectors": args.vectors, "queries": args.queries, "embed_s": round(embed_s, 1)}
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
            conn.execute("ANALYZE ks_items, ks_item_names")  # as an index rebuild would: planner statistics now
        for retrieval in ("vector", "hybrid"):
            if args.corpus == "apis":
                about = {item_id: api for item_id, (_, api) in zip(ids, labels, strict=True)}
                results[retrieval] = measure_hits(store, "bench-hybrid", embeddings, api_queries_, about, retrieval,
                                                  args.passes)
            else:
                truth = [ids[t] for t in targets]
                results[retrieval] = measure(store, "bench-hybrid", embeddings, queries, truth, retrieval,
                                             args.passes)
            print(retrieval, json.dumps(results[retrieval]), flush=True)
        store.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()

"""Hybrid retrieval: names found exactly where the vectors miss them, fused by RRF before the rerank."""

from __future__ import annotations

import random
import string

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from kernelsage.errors import ConfigurationError
from kernelsage.graph.nodes.retrieve import retrieval_query
from kernelsage.graph.records import as_state
from kernelsage.memory_backend.hybrid import query_names, reciprocal_rank_fusion
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams, parse_overrides
from kernelsage.memory_backend.store import MemoryStore
from tests.graph.test_feedback_text import failed_compile, message

DIM = 8


class Pointing(Embeddings):
    """A deliberately unhelpful embedding: every query points along the first axis, whatever it says."""

    def embed_query(self, text: str) -> list[float]:
        return [1.0] + [0.0] * (DIM - 1)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def axis(i: int, lean: float = 0.0) -> list[float]:
    v = np.zeros(DIM)
    v[i], v[0] = 1.0, v[0] + lean
    return (v / np.linalg.norm(v)).tolist()


def open_named(store: MemoryStore, namespace: str, retrieval: str):
    """Twelve near-duplicate experiences about DataCopyPad variants, nearer to every query than the one
    about DataCopyPad itself, whose vector points away (cosine 0)."""
    memory = store.open(namespace, embeddings=Pointing(), policy="static",
                        params=SageParams(retrieval=retrieval, pool_size=5, top_k=3))
    return memory, memory.add_items([
        NewItem(text="Pad the unaligned tail with DataCopyPad before the vector loop",
                evidence="error: use of undeclared identifier 'DataCopyPad'", embedding=axis(1)),
        *[NewItem(text=f"Pad the unaligned tail with DataCopyPadV{n} before the vector loop {n}",
                  evidence=f"episode {n}", embedding=axis(2 + n % 6, lean=2.0 + n)) for n in range(12)],
    ])


def test_hybrid_finds_the_item_named_by_an_exact_api_where_vectors_miss_it(store: MemoryStore,
                                                                            namespace: str) -> None:
    query = "kernel.cpp:12:5: error: use of undeclared identifier 'DataCopyPad'"
    vector, ids = open_named(store, namespace + "-v", "vector")
    assert ids[0] not in {s.item.id for s in vector.retrieve(query).cold}
    hybrid, ids = open_named(store, namespace + "-h", "hybrid")
    found = hybrid.retrieve(query).cold
    assert ids[0] in {s.item.id for s in found}  # the only exact match: DataCopyPadV2 is another name
    # normalised RRF scores reach the policy: first of one ranking 0.5, as the vectors' first
    assert [s.relevance for s in found if s.item.id == ids[0]] == [pytest.approx(0.5)]
    assert all(0 < s.relevance <= 0.5 for s in found)


def test_a_query_naming_nothing_keeps_the_vector_pool_and_its_cosines(store: MemoryStore, namespace: str) -> None:
    hybrid, _ = open_named(store, namespace, "hybrid")
    vector = store.open(namespace, embeddings=Pointing(), policy="static",
                        params=SageParams(pool_size=5, top_k=3))
    query = "the tail is not aligned to the block"
    assert query_names(query) == []
    assert [(s.item.id, s.relevance) for s in hybrid.retrieve(query).cold] == \
        [(s.item.id, s.relevance) for s in vector.retrieve(query).cold]


def test_names_follow_an_error_signature_written_later_and_leave_with_the_item(store: MemoryStore,
                                                                               namespace: str) -> None:
    memory, ids = open_named(store, namespace, "hybrid")
    with store.pool.connection() as conn:
        conn.execute("UPDATE ks_items SET metadata = metadata || '{\"error_signature\": \"ks_tile_len_v3\"}' "
                     "WHERE id = %s", (ids[5],))
    assert memory.retrieve("error: 'ks_tile_len_v3' undeclared").cold[0].item.id == ids[5]
    store.delete_namespace(namespace)
    with store.pool.connection() as conn:
        left = conn.execute("SELECT count(*) AS n FROM ks_item_names WHERE item_id = ANY(%s)", (ids,)).fetchone()
    assert left["n"] == 0


def test_query_names_keep_identifiers_whole_and_drop_prose() -> None:
    text = "x.cpp:3: error: '_mm256_fmadd_ps' was not declared in this scope; did you mean AscendC::DataCopyPad?"
    assert query_names(text) == ["x.cpp", "_mm256_fmadd_ps", "ascendc::datacopypad", "ascendc", "datacopypad"]
    assert query_names("half float16 __aicore__ TQue The error") == ["float16", "__aicore__", "tque", "the"]


def test_names_are_written_as_kernel_engineers_write_them() -> None:
    # single-word APIs are names, after the distinctive ones: a capitalised prose word must not push one out
    assert query_names("Error: no matching function for call to 'Muls(LocalTensor<half>&, int)'") == [
        "localtensor", "error", "muls"]
    # a dotted Triton name is one name, whichever way the module is spelled
    for text in ("tl.dot: incompatible shapes", "triton.language.dot: incompatible shapes"):
        assert query_names(text) == ["tl.dot"]
    assert query_names("Exp Cast Adds exp cast") == ["exp", "cast", "adds"]
    assert query_names("a limit of 16", limit=16) == []
    assert len(query_names(" ".join(f"Name{i}" for i in range(40)))) == 16


def test_a_name_too_long_for_the_index_is_kept_by_its_hash() -> None:
    symbol = "_ZN7AscendC" + "N5Tiling" * 2000 + "E"
    [key] = query_names(f"undefined reference to `{symbol}'")
    assert key.startswith("sha256:") and len(key) == len("sha256:") + 64
    assert query_names(symbol.upper()) == [key]  # names are case-blind, long ones too
    edge = "A" * 128
    assert query_names(edge) == [edge.lower()] and query_names(edge + "B")[0].startswith("sha256:")


def test_the_database_keeps_the_names_a_query_looks_up(store: MemoryStore) -> None:
    # ks_names (migration 8) and hybrid.query_names must agree on what a name is, or a query would look up a
    # name no item is indexed under: random texts of identifiers, digits, underscores, case, qualifiers,
    # punctuation and non-ASCII letters, and names on both sides of the hashing bound
    rng = random.Random(7)
    alphabet = "aZ_9 .:'<>(),-" + string.ascii_letters[:6] + "QX0é€" + "::" + "tl." * 2
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(600)]
    texts += ["".join(rng.choice("aB_1") for _ in range(rng.randint(120, 300))) for _ in range(50)]
    texts += ["_mm256_fmadd_ps AscendC::DataCopyPad LocalTensor<float16> e1 ab_ X9 aB The __aicore__",
              "triton.language.dot tl.cumsum x.y::Zed triton.language tl. Muls"]
    with store.pool.connection() as conn:
        stored = [set(r["names"]) for r in conn.execute("SELECT ks_names(t) AS names FROM unnest(%s::text[]) "
                                                        "WITH ORDINALITY AS x(t, n) ORDER BY n", (texts,))]
    assert stored == [set(query_names(t, limit=len(t))) for t in texts]
    assert stored[-2] == {"_mm256_fmadd_ps", "ascendc::datacopypad", "ascendc", "datacopypad", "localtensor",
                          "float16", "ab_", "the", "__aicore__"}
    assert stored[-1] == {"tl.dot", "tl.cumsum", "x.y::zed", "zed", "triton.language", "muls"}
    assert any(name.startswith("sha256:") for names in stored for name in names)


def test_reciprocal_rank_fusion_sums_reciprocal_ranks() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "d"]], k=1, size=10))
    best = 2 / 2  # first in both rankings: 1/2 + 1/2
    assert fused["c"] == pytest.approx((1 / 4 + 1 / 2) / best)
    assert fused["a"] == pytest.approx((1 / 2) / best)
    assert list(fused) == ["c", "a", "b", "d"]  # b (1/3) and d (1/3) tie: the earlier ranking first
    assert reciprocal_rank_fusion([["a", "b"], ["a", "b"]], k=60, size=1) == [("a", pytest.approx(1.0))]
    # a larger k flattens the ranks: the item both rankings hold overtakes one ranking's first
    both_fourth = [["a", "p", "q", "x"], ["b", "r", "s", "x"]]
    assert reciprocal_rank_fusion(both_fourth, k=1, size=1)[0][0] == "a"  # 1/2 > 2/5
    assert reciprocal_rank_fusion(both_fourth, k=60, size=1)[0][0] == "x"  # 1/61 < 2/64
    assert reciprocal_rank_fusion([], k=60, size=5) == []
    with pytest.raises(ValueError, match="k >= 1"):
        reciprocal_rank_fusion([["a"]], k=0, size=1)


@pytest.mark.parametrize("settings, fragment", [
    ({"retrieval": "bm25"}, "retrieval='bm25' must be one of vector, hybrid"),
    ({"rrf_k": 0}, "rrf_k=0 must be at least 1"),
])
def test_bad_retrieval_settings_are_refused_in_one_line(settings: dict, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SageParams(**settings)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_retrieval_settings_are_read_from_the_command_line() -> None:
    assert parse_overrides("retrieval=hybrid, rrf_k=20") == {"retrieval": "hybrid", "rrf_k": 20}
    with pytest.raises(ConfigurationError, match="retrieval='lexical'"):
        parse_overrides(["retrieval=lexical"])


def test_the_first_compiler_error_survives_a_long_task_description() -> None:
    attempt = failed_compile(message(7, "error", "no member named 'DataCopyPad' in namespace 'AscendC'"))
    query = retrieval_query({"task_id": "t", "attempts": [as_state(attempt)]}, "describe the operator " * 400)
    assert query.startswith("compiler error: no member named 'DataCopyPad'") and len(query) <= 2_000

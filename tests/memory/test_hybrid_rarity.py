"""Hybrid retrieval weighs the query's names by their rarity in the namespace: a common name (AscendC, in
a third of the items) must not tie that third with the one item that names the rare API beside it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.embeddings import Embeddings

from kernelsage.memory_backend import hybrid
from kernelsage.memory_backend.hybrid import COMMON_SHARE, name_weights
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore

DIM = 8


class Pointing(Embeddings):
    """Every query points along the first axis, whatever it says: the vectors find nothing by name."""

    def embed_query(self, text: str) -> list[float]:
        return [1.0] + [0.0] * (DIM - 1)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def axis(i: int) -> list[float]:
    v = np.zeros(DIM)
    v[i] = 1.0
    return v.tolist()


def test_a_rare_name_outweighs_a_common_one() -> None:
    # 1,000 items: Foo in one, AscendC in 333 (common: more than a tenth, more than the pool), Bar in 20
    rare, common, middling = name_weights([1, 333, 20], items=1000, pool=40)
    assert rare == pytest.approx(math.log(1000)) and middling == pytest.approx(math.log(50))
    assert common == 0.0  # left out of the lexical query
    assert name_weights([0, 7], items=7, pool=40) == [0.0, 0.0]  # held by none; held by every item
    assert name_weights([], items=0, pool=40) == []


def test_a_small_namespace_keeps_every_name_its_pool_can_hold() -> None:
    # 30 items, a pool of 40: 12 holding a name are all found anyway, so the name still counts, only less
    assert name_weights([12, 1], items=30, pool=40) == [pytest.approx(math.log(30 / 12)), pytest.approx(math.log(30))]


@given(items=st.integers(1, 5000), pool=st.integers(1, 200), counts=st.lists(st.integers(0, 5000), max_size=16))
def test_weights_fall_with_the_count_and_vanish_for_common_names(items: int, pool: int, counts: list[int]) -> None:
    counts = [min(n, items) for n in counts]
    weights = name_weights(counts, items, pool)
    assert len(weights) == len(counts) and all(w >= 0 for w in weights)
    for n, w in zip(counts, weights, strict=True):
        if n == 0 or n > max(COMMON_SHARE * items, pool):
            assert w == 0.0
    kept = sorted((n, w) for n, w in zip(counts, weights, strict=True) if w > 0)
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(kept))  # rarer weighs at least as much


def test_the_rare_name_ranks_first_though_a_common_one_ties_a_third_of_the_namespace(store: MemoryStore,
                                                                                      namespace: str) -> None:
    """90 items name AscendC (a third of 270), none of them DataCopyPadV7; the one that names only
    DataCopyPadV7 has the largest id, so a ranking that weighs both names alike puts it after the 90."""
    memory = store.open(namespace, embeddings=Pointing(), policy="static",
                        params=SageParams(retrieval="hybrid", pool_size=10, top_k=5))
    filler = [NewItem(text=f"Tile loop number {n} over the unified buffer", evidence=f"episode {n}",
                      embedding=axis(1 + n % 7)) for n in range(179)]
    common = [NewItem(text=f"Use AscendC::Muls{n} on the tail", evidence="error: no member in namespace 'AscendC'",
                      embedding=axis(1 + n % 7)) for n in range(90)]
    ids = memory.add_items([*common, *filler, NewItem(text="Pad the unaligned tail with DataCopyPadV7",
                                                      evidence="episode 999", embedding=axis(7))])
    query = "kernel.cpp:12:5: error: no member named 'DataCopyPadV7' in namespace 'AscendC'"
    with store.pool.connection() as conn:
        pool = hybrid.lexical_pool(conn, memory.info, hybrid.query_names(query), 10, exclude_resident=False)
    assert [item.id for item in pool][:1] == [ids[-1]]
    assert ids[-1] in {s.item.id for s in memory.retrieve(query).cold}

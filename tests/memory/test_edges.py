"""Edges refused where they enter: vectors without a direction, sizes that are not counts; and the ledger of
a retrieval made for an episode that was already committed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelsage.errors import EmbeddingDimensionError, ItemError
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors
from tests.memory.test_ledger import ledger_rows

BAD_VECTORS = {
    "zero": [0.0] * 16,
    "nan": [math.nan] + [0.1] * 15,
    "inf": [math.inf] + [0.1] * 15,
    "too short for float32": [1e-30] + [0.0] * 15,
    "too long for float32": [3e38] * 16,
}


@pytest.mark.parametrize("vector", BAD_VECTORS.values(), ids=BAD_VECTORS.keys())
def test_vectors_without_a_direction_are_refused_as_items_and_as_queries(store: MemoryStore, namespace: str,
                                                                           vector: list[float]) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(3))
    with pytest.raises(EmbeddingDimensionError, match=r"embedding of item 1 (has length|contains NaN)"):
        memory.add_items([NewItem(text="fine", embedding=unit_vectors(1)[0].tolist()),
                          NewItem(text="bad", embedding=vector)])
    assert memory.count_items() == 3  # the whole call was refused, the good item too
    with pytest.raises(EmbeddingDimensionError, match=r"the query embedding (has length|contains NaN)"):
        memory.retrieve(vector)
    with pytest.raises(EmbeddingDimensionError, match="the query embedding"):
        memory.relevance_pool(vector, size=3)
    with pytest.raises(EmbeddingDimensionError, match="embedding of item 0"):  # with an episode's experiences
        commit(memory, episode("e1", "relu", ids[:1], ids[:1]), [NewItem(text="bad", embedding=vector)])
    assert memory.stats()["episodes"] == 0
    # Every relevance stays a number: the vectors that did enter all have a direction.
    shown = memory.retrieve(unit_vectors(1, seed=4)[0]).cold
    assert shown and all(math.isfinite(s.relevance) and math.isfinite(s.score) for s in shown)


@pytest.mark.parametrize("size", [0, -1, -5, 2.5, True, "3", 10_000_001])
def test_sizes_that_are_not_counts_are_refused(store: MemoryStore, namespace: str, size: object) -> None:
    memory = store.open(namespace, embedding_dim=16)
    seed_items(memory, unit_vectors(8))
    query = unit_vectors(1, seed=3)[0]
    with pytest.raises(ItemError, match=r"^k, the number of cold items to return is .* it must be a whole number"):
        memory.retrieve(query, k=size)  # type: ignore[arg-type]
    with pytest.raises(ItemError, match=r"^the pool size is .* it must be a whole number from 1 to"):
        memory.relevance_pool(query, size=size)  # type: ignore[arg-type]


def test_counts_are_honoured_from_one_up(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    seed_items(memory, unit_vectors(8))
    query = unit_vectors(1, seed=3)[0]
    assert [len(memory.retrieve(query, k=k).cold) for k in (1, 2, 6, 50)] == [1, 2, 6, 8]
    assert len(memory.retrieve(query).cold) == memory.params.top_k
    assert len(memory.relevance_pool(query, size=np.int64(3))) == 3
    assert memory.list_items(limit=0) == [] and len(memory.list_items(limit=2)) == 2
    with pytest.raises(ItemError, match="the listing's limit is -1"):
        memory.list_items(limit=-1)


def test_a_repeated_commit_after_a_new_retrieval_leaves_no_ledger(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(4))
    trace = episode("e1", "relu", ids[:2], ids[:1])
    assert commit(memory, trace).applied and ledger_rows(store, memory) == {}
    memory.retrieve(unit_vectors(1, seed=2)[0], episode_id="e1", round=2)  # a resumed run retrieves again
    memory.show("e2", 1, ids[2:3])  # another episode's ledger, still waiting for its commit
    assert set(ledger_rows(store, memory)) == {"e1", "e2"}
    before = memory.get_item(ids[0])
    again = memory.commit_episode(trace)
    assert not again.applied and ledger_rows(store, memory) == {"e2": (1, 1)}
    after = memory.get_item(ids[0])
    assert (after.utility, after.n_ret, after.n_ado) == (before.utility, before.n_ret, before.n_ado)

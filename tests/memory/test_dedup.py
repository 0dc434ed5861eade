"""Near-duplicate experiences merge into the stored one that says the same thing: checked against the pure
reference (dedup.merge_targets over every stored experience), with provenance kept and no statistic moved."""

from __future__ import annotations

import numpy as np

from kernelsage.memory_backend import dedup
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, unit_vectors


def _near(vector: np.ndarray, rng: np.random.Generator, spread: float) -> list[float]:
    moved = vector + rng.normal(scale=spread, size=vector.shape)
    return (moved / np.linalg.norm(moved)).tolist()


def test_near_duplicates_merge_as_the_reference_says(store: MemoryStore, namespace: str) -> None:
    params = SageParams(merge_similarity=0.97)
    memory = MemoryStore(store.pool, params=params).open(namespace, embedding_dim=16)
    base = unit_vectors(6, seed=31)
    stored = [NewItem(text=f"lesson {i}", operator=f"op{i % 2}", embedding=v.tolist()) for i, v in enumerate(base)]
    ids = memory.add_items(stored)
    commit(memory, episode("e0", "op0", ids[:2], ids[:1]))  # statistics that a merge must not move
    before = {i: memory.get_item(i) for i in ids}
    rng = np.random.default_rng(32)
    new = [
        NewItem(text="lesson 0", operator="op0", evidence="same text, other vector", embedding=base[3].tolist()),
        NewItem(text="another wording", operator="op1", embedding=_near(base[1], rng, 0.01)),  # similar, same family
        NewItem(text="another wording", operator="op0", embedding=_near(base[1], rng, 0.01)),  # other family
        NewItem(text="far away", operator="op0", embedding=unit_vectors(1, seed=33)[0].tolist()),
        NewItem(text="FAR   away", operator="op0", embedding=unit_vectors(1, seed=34)[0].tolist()),  # the one before
        NewItem(text="lesson 4", operator="op0", kind="knowledge", embedding=base[4].tolist()),  # not an experience
    ]
    known = [dedup.Known(i, item.text, item.operator, np.asarray(item.embedding, dtype=np.float32))
             for i, item in zip(ids, stored, strict=True)]
    vectors = [np.asarray(item.embedding, dtype=np.float32) for item in new]
    reference = dedup.merge_targets(new, vectors, known, params.merge_similarity)
    assert reference == [0, 1, None, None, len(known) + 3, None]

    result = commit(memory, episode("e1", "op0", ids[2:3], ()), new_items=new)
    assert len(result.new_item_ids) == 3  # "another wording" (op0), "far away", the knowledge item
    far = result.new_item_ids[1]
    expected = [ids[0], ids[1], far]
    assert result.merged_into == expected
    mismatches = sum(a != b for a, b in zip(result.merged_into, expected, strict=True))
    assert mismatches == 0
    for item_id in ids[:2]:
        merged, old = memory.get_item(item_id), before[item_id]
        assert (merged.utility, merged.n_ret, merged.n_ado, merged.adopting_ops, merged.text, merged.state) == (
            old.utility, old.n_ret, old.n_ado, old.adopting_ops, old.text, old.state)  # nothing counted twice
        assert merged.metadata["merged_count"] == 1 and merged.metadata["merged"][0]["source_episode"] == "e1"
    assert memory.get_item(ids[0]).metadata["merged"][0]["evidence"] == "same text, other vector"
    assert memory.get_item(far).metadata["merged_count"] == 1
    assert memory.count_items() == len(ids) + 3


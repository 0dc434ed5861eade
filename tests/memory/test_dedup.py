"""Near-duplicate experiences merge into the stored one that says the same thing: checked against the pure
reference (dedup.merge_targets over every stored experience), with provenance kept and no statistic moved."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kernelsage.memory_backend import dedup
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.graph.fakes import fake_embeddings
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



def test_the_same_text_merges_whatever_family_and_vector() -> None:
    """The rule itself: identical text (up to case and white space) merges across families and whatever the
    vectors; a different wording merges only within its family."""
    v, w = unit_vectors(2, seed=35)
    stored = [dedup.Known(7, "Keep the inner loop  contiguous", "matmul", v)]
    same_text = NewItem(text="keep the inner loop contiguous", operator="l2_softmax", metadata={"family": "softmax"})
    close = _near(v, np.random.default_rng(36), 0.01)
    reworded = NewItem(text="Keep inner loops contiguous", operator="l2_softmax", metadata={"family": "softmax"})
    assert dedup.merge_targets([same_text], [w], stored, 0.97) == [0]
    assert dedup.merge_targets([reworded], [np.asarray(close)], stored, 0.97) == [None]
    assert dedup.merge_targets([replace(reworded, metadata={"family": "matmul"})], [np.asarray(close)], stored,
                               0.97) == [0]


def test_identical_lessons_written_in_one_batch_and_across_commits_end_as_one_item(store: MemoryStore,
                                                                                   namespace: str) -> None:
    """The demo's case: the curator of six operators of six categories writes the same lesson, embedded from
    its text. One item holds it, with its own statistics and every other source and evidence in `merged`."""
    memory = store.open(namespace, embeddings=fake_embeddings())
    lesson = "Parallelise the outermost independent loop with #pragma omp parallel for."

    def taught(operator: str, category: str, text: str = lesson) -> NewItem:
        return NewItem(text=text, operator=operator, evidence=f"{operator}: 2.0 ms -> 1.0 ms",
                       code_example=f"--- {operator}/kernel.cpp", metadata={"family": category})

    first = commit(memory, episode("e1", "l1_relu", (), ()),
                   [taught("l1_relu", "activation"), taught("l1_relu", "activation", "Check the formula first.")])
    lesson_id = first.new_item_ids[0]
    commit(memory, episode("e2", "l1_add", [lesson_id], [lesson_id]))  # statistics the merges must keep
    before = memory.get_item(lesson_id)
    batch = commit(memory, episode("e3", "l2_softmax", (), ()),
                   [taught("l2_softmax", "softmax"), taught("l2_softmax", "softmax", lesson.upper()),
                    taught("l3_topk", "topk", "  " + lesson.replace(" ", "   ") + "\n")])
    later = [commit(memory, episode(f"e{4 + n}", op, (), ()), [taught(op, family)])
             for n, (op, family) in enumerate([("l2_add_rms_norm", "norm_residual"), ("l3_matmul", "matmul")])]

    assert batch.new_item_ids == [] and batch.merged_into == [lesson_id] * 3
    assert [r.merged_into for r in later] == [[lesson_id], [lesson_id]]
    assert memory.count_items(kind="experience") == 2  # the lesson once, and the other one
    merged = memory.get_item(lesson_id)
    assert (merged.utility, merged.n_ret, merged.n_ado, merged.adopting_ops, merged.state) == (
        before.utility, before.n_ret, before.n_ado, before.adopting_ops, before.state)  # nothing counted twice
    assert before.n_ado == 1 and merged.source_episode == "e1" and merged.evidence == "l1_relu: 2.0 ms -> 1.0 ms"
    assert merged.metadata["merged_count"] == 5
    sources = [(p["source_episode"], p["operator"], p["family"], p["evidence"], p["code_example"])
               for p in merged.metadata["merged"]]
    expected = [("e3", "l2_softmax", "softmax"), ("e3", "l2_softmax", "softmax"), ("e3", "l3_topk", "topk"),
                ("e4", "l2_add_rms_norm", "norm_residual"), ("e5", "l3_matmul", "matmul")]
    assert sources == [(e, op, f, f"{op}: 2.0 ms -> 1.0 ms", f"--- {op}/kernel.cpp") for e, op, f in expected]

"""Nothing lost, whatever the text: random and hostile texts (mangled symbols past the index's limits, NUL, lone
surrogates, every Unicode plane, names as kernel engineers write them) through add_items, retrieve and
commit_episode. Each call either stores exactly what it was given, or refuses with a kernelsage error and
changes nothing; never a raw error, never half a write.

The number of random cases is KERNELSAGE_PROPERTY_EXAMPLES (default 300, so the suite stays quick; the issue's
measure is 10,000: `KERNELSAGE_PROPERTY_EXAMPLES=10000 pytest tests/memory/test_hostile_text.py`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import Embeddings

from kernelsage.errors import EpisodeError, KernelsageError
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure
from kernelsage.memory_backend.store import Memory, MemoryStore

EXAMPLES = int(os.environ.get("KERNELSAGE_PROPERTY_EXAMPLES", "300"))
DIM = 16


class Hashed(Embeddings):
    """A test stand-in for an embedding model: a unit vector from a hash of the text's code points (so a lone
    surrogate reaches the store, which must refuse it, instead of failing here)."""

    def embed_query(self, text: str) -> list[float]:
        seed = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        vector = np.random.default_rng(list(seed)).normal(size=DIM)
        return (vector / np.linalg.norm(vector)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def symbols() -> st.SearchStrategy[str]:
    """Names as a linker, compiler or kernel engineer writes them, up to far past the index's 2,700 bytes."""
    part = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", min_size=1,
                   max_size=12)
    mangled = st.builds(lambda n, parts: "_ZN" + "".join(f"{len(p)}{p}" for p in parts) * n,
                        st.integers(1, 400), st.lists(part, min_size=1, max_size=6))
    qualified = st.lists(part, min_size=2, max_size=4).map(lambda p: st_join(p))
    return st.one_of(mangled, qualified, st.sampled_from(["tl.dot", "triton.language.cumsum", "Muls", "Exp",
                                                           "AscendC::DataCopyPad", "_mm256_fmadd_ps"]))


def st_join(parts: list[str]) -> str:
    return "::".join(parts) if len(parts) % 2 else ".".join(parts)


def hostile_texts() -> st.SearchStrategy[str]:
    """Text from every plane (surrogates and NUL included), symbols, white space, mixed."""
    anything = st.text(st.characters(exclude_categories=()), max_size=200)  # NUL included
    surrogate = st.characters(categories=["Cs"])
    return st.one_of(
        anything,
        symbols(),
        st.lists(st.one_of(anything, symbols(), surrogate, st.just("\x00"), st.just(" ")), max_size=6).map("".join),
        st.sampled_from(["", " \t\n", "\x00", "\ud800", "a" * 9_000]),
    )


@dataclass(frozen=True)
class Case:
    text: str
    evidence: str
    code: str | None
    rationale: str
    query: str


cases = st.builds(Case, text=hostile_texts(), evidence=hostile_texts(),
                  code=st.one_of(st.none(), hostile_texts()), rationale=hostile_texts(), query=hostile_texts())


@pytest.fixture(scope="module")
def memory(store: MemoryStore) -> Iterator[Memory]:
    name = f"hostile-{uuid.uuid4().hex[:10]}"
    memory = store.open(name, embeddings=Hashed(), params=SageParams(retrieval="hybrid"))
    memory.add_items([NewItem(text=f"a plain lesson {n} about DataCopyPad and tl.dot", embedding=Hashed()
                              .embed_query(str(n))) for n in range(8)])
    yield memory
    store.delete_namespace(name)


def stored_whole(memory: Memory, item_id: int, item: NewItem) -> None:
    got = memory.get_item(item_id)
    assert (got.text, got.evidence, got.code_example) == (item.text, item.evidence, item.code_example)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(case=cases)
def test_hostile_texts_are_stored_whole_or_refused_with_nothing_changed(memory: Memory, case: Case) -> None:
    item = NewItem(text=case.text, evidence=case.evidence, code_example=case.code)
    before = memory.count_items()
    try:
        [added] = memory.add_items([item])
    except KernelsageError as refused:
        event(f"add_items refused: {type(refused).__name__}")
        assert memory.count_items() == before
    else:
        event("add_items stored")
        stored_whole(memory, added, item)

    episode_id = f"e-{uuid.uuid4().hex}"
    try:
        shown = [s.item.id for s in memory.retrieve(case.query, episode_id=episode_id, round=1).shown]
    except KernelsageError:
        shown = [i.id for i in memory.list_items(limit=2)]
        memory.show(episode_id, 1, shown)
    trace = EpisodeTrace(episode_id=episode_id, operator="relu", t_first=2.0, t_best=1.0, exposures=tuple(
        Exposure(item_id=i, round=1, tier="cold", adopted=n == 0, rationale=case.rationale)
        for n, i in enumerate(shown)))
    lesson = NewItem(text=case.query, evidence=case.text, code_example=case.code, operator="relu")
    before = memory.count_items()
    try:
        result = memory.commit_episode(trace, [lesson])
    except KernelsageError as refused:
        event(f"commit refused: {type(refused).__name__}")
        assert memory.count_items() == before
        with pytest.raises(EpisodeError):
            memory.load_episode(episode_id)  # refused whole: nothing of it was recorded
        return
    event(f"commit applied ({len(result.new_item_ids)} new, {len(result.merged_into)} merged, "
          f"{len(result.unstored)} refused)")
    assert result.applied
    assert {e.item_id for e in memory.load_episode(episode_id).exposures} == set(shown)
    assert memory.count_items() == before + len(result.new_item_ids)
    for new_id in result.new_item_ids:
        stored_whole(memory, new_id, lesson)
    assert len(result.new_item_ids) + len(result.merged_into) + len(result.unstored) == 1  # no lesson vanishes

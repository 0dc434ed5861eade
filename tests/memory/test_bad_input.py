"""Bad input is refused whole, with a kernelsage error that names it, and nothing changes."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from langgraph.store.base import InvalidNamespaceError

from kernelsage.errors import (
    DatabaseError,
    EmbeddingValueError,
    EpisodeError,
    ItemError,
    QueryError,
    TransferFormatError,
)
from kernelsage.memory_backend import MemoryStoreView
from kernelsage.memory_backend.database import database_url, open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, RoundOutcome
from kernelsage.memory_backend.store import Memory, MemoryStore
from kernelsage.memory_backend.transfer import export_jsonl, import_jsonl
from tests.graph.fakes import fake_embeddings
from tests.memory.helpers import commit, episode, seed_items, unit_vectors


def _unchanged(memory: Memory, ids: list[int]) -> tuple:
    return memory.stats()["episodes"], [(i.utility, i.n_ret, i.n_ado, i.access) for i in map(memory.get_item, ids)]


@pytest.mark.parametrize(("t_first", "t_best", "match"), [
    (math.nan, 1.0, "finite"), (2.0, math.inf, "finite"), (2.0, math.nan, "finite"), (-1.0, 1.0, "finite"),
    (0.0, 0.0, "finite"), (None, 1.0, "no t_first"),
])
def test_latencies_must_be_finite_and_positive(store: MemoryStore, namespace: str, t_first, t_best, match) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(3))
    before = _unchanged(memory, ids)
    with pytest.raises(EpisodeError, match=match):
        commit(memory, episode("e1", "relu", ids, ids[:1], t_first=t_first, t_best=t_best))
    assert _unchanged(memory, ids) == before


def test_a_solved_round_without_t_first_is_refused(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(2))
    trace = replace(episode("e1", "relu", ids, ids[:1], t_first=None, t_best=None),
                    rounds=(RoundOutcome(round=1, stage="draft", compiled=True, correct=True, latency=1e-3),))
    with pytest.raises(EpisodeError, match="t_first is missing"):
        commit(memory, trace)
    assert memory.stats()["episodes"] == 0


def test_a_commit_must_match_what_its_retrievals_showed(store: MemoryStore, namespace: str) -> None:
    memory = MemoryStore(store.pool, params=SageParams(k_ado=1, k_op=1)).open(namespace, embedding_dim=16)
    vectors = unit_vectors(6)
    ids = seed_items(memory, vectors)
    commit(memory, episode("e0", "relu", ids[:1], ids[:1]))
    memory.consolidate()
    rule = ids[0]
    assert [r.id for r in memory.hot_rules()] == [rule]
    found = memory.retrieve(vectors[1], k=2, episode_id="e1", round=1)
    cold = [s.item.id for s in found.cold]
    before = _unchanged(memory, ids)

    def exposures(pairs: list[tuple[int, str]], round_no: int = 1) -> tuple[Exposure, ...]:
        return tuple(Exposure(item_id=i, round=round_no, tier=t, adopted=False) for i, t in pairs)

    def trace(pairs: list[tuple[int, str]], **kwargs: object) -> EpisodeTrace:
        return EpisodeTrace(episode_id="e1", operator="gelu", t_first=2.0, t_best=1.0,
                            exposures=kwargs.pop("exp", None) or exposures(pairs), **kwargs)  # type: ignore[arg-type]

    complete = [(rule, "hot"), *[(i, "cold") for i in cold]]
    never = next(i for i in ids if i not in cold and i != rule)
    cases = [
        (trace([(rule, "cold"), *[(i, "cold") for i in cold]]), "wrong tier"),  # a hot rule recorded as cold
        (trace([(i, "cold") for i in cold]), rf"resident rules \[{rule}\]"),  # the resident rule left out
        (trace([*complete, (never, "cold")]), "not shown"),  # credit for an item never shown
        (trace(complete, exp=exposures(complete, round_no=2)), "no retrieval"),  # a round never retrieved
        (trace(complete, hot_version_seen=found.hot_version + 5), "hot-memory version"),
    ]
    for bad, match in cases:
        with pytest.raises(EpisodeError, match=match):
            memory.commit_episode(bad)
        assert _unchanged(memory, ids) == before
    result = memory.commit_episode(trace(complete))
    assert result.applied and set(result.credits) == {rule, *cold}
    assert memory.load_episode("e1").hot_version_seen == found.hot_version  # recorded from the ledger
    assert memory.get_item(rule).access != before[1][0][3]  # the resident rule's access estimate moved


@pytest.mark.parametrize(("item", "match"), [
    (NewItem(text="x" * 1_000_000), "limit is 8,000"),
    (NewItem(text="   "), "is empty"),
    (NewItem(text="a\x00b"), "text of item 1 contains a NUL character at position 1"),
    (NewItem(text="ok", evidence="e" * 100_000), "evidence"),
    (NewItem(text="ok", kind="secret"), "kind"),
    (NewItem(text="ok", metadata={"x": math.nan}), "plain JSON"),
    (NewItem(text="ok", metadata=["not", "a", "dict"]), "must be a dict"),  # type: ignore[arg-type]
    (NewItem(text="a\ud800b"), r"text of item 1 contains a lone surrogate '\\ud800' at position 1"),
    (NewItem(text="ok", evidence="\udfff"), "evidence of item 1 contains a lone surrogate"),
    (NewItem(text="ok", code_example="x\ud83d"), "code example of item 1 contains a lone surrogate"),
    (NewItem(text="ok", operator="relu\udc80"), "operator of item 1 contains a lone surrogate"),
    (NewItem(text="ok", metadata={"notes": ["fine", "x\ud800"]}), r"value at \['notes'\]\[1\] contains a lone"),
    (NewItem(text="ok", metadata={"a": {"\ud800": 1}}), r"key '\\ud800' under \['a'\] contains a lone"),
    (NewItem(text="ok", metadata={"a": "xy\x00"}), r"value at \['a'\] contains a NUL character at position 2"),
])
def test_oversized_or_malformed_items_are_refused(store: MemoryStore, namespace: str, item: NewItem,
                                                  match: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    with pytest.raises(ItemError, match=match):
        memory.add_items([NewItem(text="fine", embedding=[1.0] * 16), replace(item, embedding=[1.0] * 16)])
    assert memory.count_items() == 0


@pytest.mark.parametrize(("exposure", "match"), [
    (dict(item_id=0), "no item can have"), (dict(item_id=2**70), "no item can have"),
    (dict(round=-1), "rounds run"), (dict(rationale="x\x00"), "NUL"), (dict(rationale="r" * 5000), "limit"),
    (dict(relevance=math.nan), "relevance"),
])
def test_malformed_exposures_are_named_not_passed_to_the_driver(store: MemoryStore, namespace: str, exposure: dict,
                                                                match: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(1))
    good = dict(item_id=ids[0], round=1, tier="cold", adopted=True)
    trace = EpisodeTrace(episode_id="e1", operator="relu", exposures=(Exposure(**{**good, **exposure}),))
    with pytest.raises(EpisodeError, match=match):
        memory.commit_episode(trace)
    twice = EpisodeTrace(episode_id="e1", operator="relu", exposures=(Exposure(**good), Exposure(**good)))
    with pytest.raises(EpisodeError, match="more than once"):
        memory.commit_episode(twice)
    assert memory.stats()["episodes"] == 0


def test_set_up_errors_are_one_line_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "this is not a url")
    with pytest.raises(DatabaseError, match=r"not a valid PostgreSQL connection string.*unset DATABASE_URL") as bad:
        database_url()
    assert "\n" not in str(bad.value)
    with pytest.raises(DatabaseError, match="not a valid PostgreSQL connection string"):
        open_pool("host=x port")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(DatabaseError, match=r"cannot create the memory's data directory.*KERNELSAGE_HOME") as home:
        embedded_database_url(blocker / "pgdata")
    assert "\n" not in str(home.value)
    garbage = tmp_path / "not-a-database"
    (garbage / "postmaster.pid").parent.mkdir()
    (garbage / "PG_VERSION").write_text("not a version\n")
    with pytest.raises(DatabaseError, match="could not start the embedded PostgreSQL") as broken:
        embedded_database_url(garbage)
    assert "\n" not in str(broken.value) and len(str(broken.value)) < 700


def test_exports_are_checked_whole(store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(4))
    commit(memory, episode("e1", "relu", ids, ids[:1]))
    with pytest.raises(TransferFormatError, match="does not exist; create it"):
        export_jsonl(store, namespace, tmp_path / "missing" / "m.jsonl")
    path = tmp_path / "m.jsonl"
    export_jsonl(store, namespace, path)
    lines = path.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-2]) + "\n")  # cut short at a record boundary
    with pytest.raises(TransferFormatError, match="cut short"):
        import_jsonl(store, cut, namespace + "-cut")
    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join([*lines[:-1], lines[-1]]).replace('"n_ado": 1', '"n_ado": 7') + "\n")
    with pytest.raises(TransferFormatError, match="checksum"):
        import_jsonl(store, changed, namespace + "-changed")
    assert store.namespace_info(namespace + "-cut") is None and store.namespace_info(namespace + "-changed") is None
    assert import_jsonl(store, path, namespace + "-copy").episode_seq == 1


# An embedding is one flat list of real numbers; each of these raised TypeError or ValueError from numpy, or
# (nested) a message that contradicted itself ("has dimension 4, but this namespace stores 4-dimensional").
BAD_EMBEDDINGS = {
    "a JSON string": ("[0.1, 0.2, 0.3, 0.4]", "is text"),
    "a short string": ("[0.1, 0.2]", "is text"),
    "complex values": ([1 + 2j, 0.2, 0.3, 0.4], "holds complex numbers"),
    "a complex array": (np.array([1j, 0.2, 0.3, 0.4]), "holds complex numbers"),
    "nested": ([[0.1, 0.2, 0.3, 0.4]], r"is nested \(shape \(1, 4\)\)"),
    "nested in pairs": ([[0.1, 0.2], [0.3, 0.4]], "is nested"),
    "ragged": ([[0.1, 0.2], 0.3, 0.4], "holds a nested list at position 0"),
    "a 2-d array": (np.ones((1, 4)), "is nested"),
    "numbers as text": (["1", "2", "3", "4"], "holds text"),
    "true and false": ([True, False, True, True], "holds true/false values"),
    "a None": ([None, 0.2, 0.3, 0.4], "holds None at position 0"),
    "a dict": ({"x": 1.0}, "is a dict"),
}


@pytest.mark.parametrize(("vector", "match"), BAD_EMBEDDINGS.values(), ids=BAD_EMBEDDINGS.keys())
def test_embeddings_that_are_not_flat_lists_of_numbers_are_named(store: MemoryStore, namespace: str,
                                                                 vector: object, match: str) -> None:
    memory = store.open(namespace, embedding_dim=4)
    good = NewItem(text="fine", embedding=[1.0, 0.0, 0.0, 0.0])
    with pytest.raises(EmbeddingValueError, match="the embedding of item 1 " + match):
        memory.add_items([good, NewItem(text="bad", embedding=vector)])  # type: ignore[arg-type]
    assert memory.count_items() == 0
    with pytest.raises(EmbeddingValueError, match="the embedding of item 0 " + match):
        memory.commit_episode(episode("e1", "relu", (), ()), [NewItem(text="bad", embedding=vector)])  # type: ignore[arg-type]
    assert memory.stats()["episodes"] == 0 and memory.count_items() == 0
    memory.add_items([good])
    for search in (lambda: memory.retrieve(vector, episode_id="e1", round=1),  # type: ignore[arg-type]
                   lambda: memory.relevance_pool(vector, size=2)):  # type: ignore[arg-type]
        if isinstance(vector, str):  # a text query: retrieve embeds it; relevance_pool takes vectors only
            continue
        with pytest.raises(EmbeddingValueError, match="the query embedding " + match):
            search()
    with pytest.raises(EmbeddingValueError, match="the query embedding is text"):
        memory.relevance_pool("[1.0, 0.0, 0.0, 0.0]", size=2)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "match"), [
    ("relu \ud800 kernel", r"contains a lone surrogate '\\ud800' at position 5"),
    ("relu\x00", "contains a NUL character at position 4"),
])
def test_query_texts_must_be_valid_unicode_without_nul(store: MemoryStore, namespace: str, text: str,
                                                       match: str) -> None:
    memory = store.open(namespace, embeddings=fake_embeddings())
    memory.add_items([NewItem(text="Parallelise the outer loop")])
    with pytest.raises(QueryError, match="the query text " + match):
        memory.retrieve(text, episode_id="e1", round=1)
    view = MemoryStoreView(store, embeddings=fake_embeddings())
    with pytest.raises(QueryError, match="the query text " + match):
        view.search(tuple(namespace.split("/")), query=text)
    # nothing was recorded for the refused retrieval: a commit showing nothing is accepted as it stands
    assert memory.commit_episode(episode("e1", "relu", (), ())).applied


def test_the_store_view_names_labels_and_states_the_database_cannot_hold(store: MemoryStore,
                                                                         namespace: str) -> None:
    memory = store.open(namespace, embeddings=fake_embeddings())
    memory.add_items([NewItem(text="Parallelise the outer loop")])
    view = MemoryStoreView(store, embeddings=fake_embeddings())
    for label, match in (("a\ud800", "lone surrogate '\\\\ud800' at position 1"), ("a\x00", "NUL")):
        with pytest.raises(InvalidNamespaceError, match=match):
            view.search((namespace, label))
        with pytest.raises(InvalidNamespaceError, match=match):
            view.get((label,), "1")
    assert view.search((namespace,), filter={"state": "\ud800"}) == []  # no item is in that state
    assert len(view.search((namespace,), filter={"state": "cold"})) == 1


@pytest.mark.parametrize(("change", "match"), [
    (dict(operator="relu\ud800"), "operator of episode 'e1' contains a lone surrogate"),
    (dict(episode_id="e\ud800"), "episode id contains a lone surrogate"),
    (dict(policy="sage\x00"), "policy name contains a NUL character at position 4"),
    (dict(metadata={"model": "m\ud800"}), r"metadata of episode 'e1': the value at \['model'\] contains a lone"),
    (dict(level="\ud800"), "level of episode 'e1'"),
    (dict(level=True), "level of episode 'e1'"),
    (dict(rounds=(RoundOutcome(round=1, stage="drafting", compiled=True, correct=False),)), "stage 'drafting'"),
    (dict(rounds=(RoundOutcome(round="1", stage="draft", compiled=True, correct=False),)), "round '1'"),
])
def test_episodes_the_database_cannot_hold_are_named(store: MemoryStore, namespace: str, change: dict,
                                                     match: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(2))
    before = _unchanged(memory, ids)
    with pytest.raises(EpisodeError, match=match):
        memory.commit_episode(replace(episode("e1", "relu", (), ()), **change))
    with pytest.raises(ItemError, match="text of item 0 contains a lone surrogate"):  # an experience of a commit
        memory.commit_episode(episode("e1", "relu", (), ()), [NewItem(text="x\ud800", embedding=[1.0] * 16)])
    assert _unchanged(memory, ids) == before and memory.count_items() == len(ids)

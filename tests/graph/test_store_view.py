"""The read-only LangGraph BaseStore view of the memory, on the real embedded server."""

from __future__ import annotations

import asyncio
import json
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp

from kernelsage.errors import ConfigurationError, KernelsageError, NamespaceError, ReadOnlyMemoryError
from kernelsage.memory_backend import MemoryStoreView, NewItem
from kernelsage.memory_backend.store import Memory, MemoryStore
from tests.graph.fakes import fake_embeddings

TEXTS = [
    "Parallelise elementwise loops with #pragma omp parallel for",
    "Return 0 from ks_kernel and end every statement with a semicolon",
    "Handle float16 by converting through float with the header helpers",
]


def _seed(store: MemoryStore, name: str) -> tuple[Memory, list[int]]:
    memory = store.open(name, embeddings=fake_embeddings())
    ids = memory.add_items([
        NewItem(text=TEXTS[0], operator="l1_add", evidence="episode e1", metadata={"source": "test"}),
        NewItem(text=TEXTS[1], operator="l1_abs", kind="knowledge"),
        NewItem(text=TEXTS[2], operator="l1_abs"),
    ])
    return memory, ids


def _set_up(store: MemoryStore, ids: list[int], *, utility: list[float], hot: int) -> None:
    """Test set-up: statistics as after some episodes, and one resident rule, without replaying them."""
    with store.pool.connection() as conn:
        conn.execute("UPDATE ks_items AS t SET utility = u.u FROM unnest(%s::bigint[], %s::float8[]) AS u(id, u) "
                     "WHERE t.id = u.id", (ids, utility))
        conn.execute("UPDATE ks_items SET state = 'hot' WHERE id = %s", (hot,))  # residency is the state alone


@pytest.fixture
def view(store: MemoryStore) -> MemoryStoreView:
    return MemoryStoreView(store, embeddings=fake_embeddings())


def test_get_returns_the_item_as_a_json_ready_value(store: MemoryStore, namespace: str,
                                                    view: MemoryStoreView) -> None:
    memory, ids = _seed(store, f"{namespace}/cpp/default")
    path = (namespace, "cpp", "default")
    got = view.get(path, str(ids[0]))
    stored = memory.get_item(ids[0])
    assert got is not None
    assert (got.namespace, got.key) == (path, str(ids[0]))
    assert got.value["text"] == TEXTS[0] and got.value["operator"] == "l1_add"
    assert got.value["evidence"] == "episode e1" and got.value["metadata"] == {"source": "test"}
    assert got.value["state"] == "cold" and got.value["kind"] == "experience" and got.value["adopting_ops"] == []
    assert got.value["tokens"] == stored.tokens and got.value["n_ret"] == 0 and got.value["utility"] == 0.0
    assert (got.created_at, got.updated_at) == (stored.created_at, stored.updated_at)
    assert json.loads(json.dumps(got.value)) == got.value
    assert view.get(path, str(ids[1])).value["kind"] == "knowledge"


def test_get_of_what_is_not_there_is_none(store: MemoryStore, namespace: str, view: MemoryStoreView) -> None:
    _, ids = _seed(store, namespace)
    _, other = _seed(store, f"{namespace}-other")
    assert view.get((namespace,), str(ids[0])) is not None
    assert view.get((namespace,), str(other[0])) is None  # another namespace's item
    assert view.get((namespace,), str(max(other) + 1000)) is None
    assert view.get((namespace,), "not-a-number") is None
    assert view.get((namespace,), f"0{ids[0]}") is None  # a key is the id as str() writes it
    assert view.get((namespace, "missing"), str(ids[0])) is None
    with pytest.raises(InvalidNamespaceError, match="without '/'"):
        view.get((f"{namespace}/x",), str(ids[0]))


def test_search_with_a_query_ranks_the_closest_item_first(store: MemoryStore, namespace: str,
                                                          view: MemoryStoreView) -> None:
    _, ids = _seed(store, namespace)
    for wanted in (1, 2):
        hits = view.search((namespace,), query=TEXTS[wanted])
        assert hits[0].key == str(ids[wanted])
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert sorted(h.key for h in hits) == sorted(map(str, ids))
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(view.search((namespace,), query=TEXTS[0], limit=2)) == 2


def test_search_filters_on_value_fields(store: MemoryStore, namespace: str, view: MemoryStoreView) -> None:
    _, ids = _seed(store, namespace)
    _set_up(store, ids, utility=[0.2, -0.1, 0.5], hot=ids[0])
    hits = view.search((namespace,), query=TEXTS[0], filter={"operator": "l1_abs"})
    assert {h.key for h in hits} == {str(ids[1]), str(ids[2])}  # the exact match is filtered out
    assert [h.key for h in view.search((namespace,), filter={"kind": "knowledge"})] == [str(ids[1])]
    assert [h.key for h in view.search((namespace,), filter={"state": "hot"})] == [str(ids[0])]
    assert [h.key for h in view.search((namespace,), query=TEXTS[0], filter={"state": "hot"})] == [str(ids[0])]
    assert [h.key for h in view.search((namespace,), filter={"utility": {"$gt": 0}})] == [str(ids[2]), str(ids[0])]
    assert view.search((namespace,), filter={"operator": "l1_relu"}) == []
    # limit=1: the first item fetched is filtered out, so the view must fetch further
    assert [h.key for h in view.search((namespace,), filter={"kind": "knowledge"}, limit=1)] == [str(ids[1])]
    assert len(view.search((namespace,), query=TEXTS[0], filter={"operator": "l1_abs"}, limit=1)) == 1
    with pytest.raises(ConfigurationError, match="unknown filter operator"):
        view.search((namespace,), filter={"utility": {"$near": 0}})


def test_search_without_a_query_lists_by_utility(store: MemoryStore, namespace: str, view: MemoryStoreView) -> None:
    _, ids = _seed(store, namespace)
    _set_up(store, ids, utility=[0.2, -0.1, 0.5], hot=ids[0])
    hits = view.search((namespace,))
    assert [h.key for h in hits] == [str(ids[2]), str(ids[0]), str(ids[1])]
    assert all(h.score is None for h in hits)
    assert [h.key for h in view.search((namespace,), limit=1, offset=1)] == [str(ids[0])]


def test_a_prefix_searches_every_namespace_below_it(store: MemoryStore, namespace: str,
                                                   view: MemoryStoreView) -> None:
    _, fast = _seed(store, f"{namespace}/cpp/fast")
    _, default = _seed(store, f"{namespace}/cpp/default")
    _, ascend = _seed(store, f"{namespace}/ascend/default")
    hits = view.search((namespace, "cpp"), query=TEXTS[1], limit=10)
    assert {(h.namespace, h.key) for h in hits[:2]} == {((namespace, "cpp", "fast"), str(fast[1])),
                                                        ((namespace, "cpp", "default"), str(default[1]))}
    assert {h.key for h in hits} == {str(i) for i in fast + default}
    assert {h.key for h in view.search((namespace,), limit=20)} == {str(i) for i in fast + default + ascend}


def test_list_namespaces_matches_prefix_suffix_and_depth(store: MemoryStore, namespace: str,
                                                         view: MemoryStoreView) -> None:
    for name in ("cpp/default", "cpp/fast", "ascend/default"):
        store.open(f"{namespace}/{name}", embedding_dim=4)
    assert view.list_namespaces(prefix=(namespace,)) == [
        (namespace, "ascend", "default"), (namespace, "cpp", "default"), (namespace, "cpp", "fast")]
    assert view.list_namespaces(prefix=(namespace,), max_depth=2) == [(namespace, "ascend"), (namespace, "cpp")]
    assert view.list_namespaces(prefix=(namespace,), suffix=("default",)) == [
        (namespace, "ascend", "default"), (namespace, "cpp", "default")]
    assert view.list_namespaces(prefix=(namespace, "*", "fast")) == [(namespace, "cpp", "fast")]
    assert view.list_namespaces(prefix=(namespace,), limit=1, offset=1) == [(namespace, "cpp", "default")]


def test_writes_are_refused_with_the_ways_to_change_memory(store: MemoryStore, namespace: str,
                                                           view: MemoryStoreView) -> None:
    memory, ids = _seed(store, namespace)
    with pytest.raises(ReadOnlyMemoryError, match="read-only") as refused:
        view.put((namespace,), "new", {"text": "remember this"})
    assert isinstance(refused.value, KernelsageError)
    for way in ("commit_episode", "add_items", "kernelsage memory seed"):
        assert way in str(refused.value)
    with pytest.raises(ReadOnlyMemoryError, match="cannot delete"):
        view.delete((namespace,), str(ids[0]))
    with pytest.raises(ReadOnlyMemoryError):  # a batch with a write does nothing at all
        view.batch([GetOp((namespace,), str(ids[0])), PutOp((namespace,), "x", {"text": "y"})])
    assert memory.count_items() == 3 and memory.get_item(ids[0]).text == TEXTS[0]


def test_async_reads_and_a_query_without_embeddings(store: MemoryStore, namespace: str,
                                                     view: MemoryStoreView) -> None:
    _, ids = _seed(store, namespace)
    got = asyncio.run(view.aget((namespace,), str(ids[2])))
    assert got is not None and got.value["text"] == TEXTS[2]
    hits = asyncio.run(view.asearch((namespace,), query=TEXTS[2], limit=1))
    assert [h.key for h in hits] == [str(ids[2])]
    with pytest.raises(ConfigurationError, match="needs embeddings"):
        MemoryStoreView(store).search((namespace,), query=TEXTS[0])
    store.open(f"{namespace}/wide", embedding_dim=8)
    with pytest.raises(NamespaceError, match="can be searched with embeddings"):
        view.search((namespace, "wide"), query=TEXTS[0])


class RecallState(TypedDict):
    need: str
    recalled: list[str]


def test_a_graph_node_reads_memory_through_runtime_store(store: MemoryStore, namespace: str) -> None:
    _, ids = _seed(store, namespace)

    def recall(state: RecallState, runtime: Runtime) -> dict[str, list[str]]:
        hits = runtime.store.search((namespace,), query=state["need"], limit=1)
        return {"recalled": [f"{h.key}: {h.value['text']}" for h in hits]}

    builder = StateGraph(RecallState)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=MemoryStoreView(store, embeddings=fake_embeddings()))
    for wanted in (1, 2):
        result = graph.invoke({"need": TEXTS[wanted], "recalled": []})
        assert result["recalled"] == [f"{ids[wanted]}: {TEXTS[wanted]}"]

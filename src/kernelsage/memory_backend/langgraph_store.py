"""kernelsage's memory as a read-only LangGraph `BaseStore`, for `runtime.store`, Studio and store tools.

A kernelsage namespace "cpu/cpp/default" is the LangGraph namespace ("cpu", "cpp", "default"); an
item's key is its id as text and its value a JSON-ready dict of the item. Writes are refused: memory
changes only through the episode commit, `Memory.add_items` or `kernelsage memory seed`, so every
change is credited and audited.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from datetime import datetime
from functools import partial
from typing import Any, get_args

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from kernelsage.errors import ConfigurationError, NamespaceError, ReadOnlyMemoryError
from kernelsage.memory_backend.embeddings import embedding_name
from kernelsage.memory_backend.items import MemoryItem, NamespaceInfo
from kernelsage.memory_backend.policies import get_policy
from kernelsage.memory_backend.records import Lifecycle
from kernelsage.memory_backend.store import Memory, MemoryStore
from kernelsage.memory_backend.validation import check_query_text, text_problem

SEPARATOR = "/"
LIFECYCLE_STATES = get_args(Lifecycle)
_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt,
    "$lte": operator.le,
}
Found = tuple[NamespaceInfo, MemoryItem, dict[str, Any], float | None]  # namespace, item, its value, score


def item_value(item: MemoryItem) -> dict[str, Any]:
    """An item as a JSON-ready dict: every field but the two timestamps an `Item` carries itself."""
    value = {f.name: getattr(item, f.name) for f in fields(item) if f.name not in ("created_at", "updated_at")}
    value["adopting_ops"] = list(item.adopting_ops)
    value["resident_text"] = item.resident_text
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in value.items()}


def _matches(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    """Equality on value fields; {"$gt": x}-style comparisons as LangGraph's stores accept them."""
    for key, expected in (conditions or {}).items():
        actual = value.get(key)
        if isinstance(expected, dict) and expected and all(k.startswith("$") for k in expected):
            unknown = sorted(set(expected) - set(_COMPARISONS))
            if unknown:
                raise ConfigurationError(f"unknown filter operator(s) {unknown} on {key!r}: use {list(_COMPARISONS)}")
            try:
                if not all(_COMPARISONS[op](actual, operand) for op, operand in expected.items()):
                    return False
            except TypeError:  # None or a text compared by order: no match
                return False
        elif actual != expected:
            return False
    return True


def _namespace_name(path: Sequence[str]) -> str:
    for label in path:
        if not isinstance(label, str) or not label or SEPARATOR in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {tuple(path)}: kernelsage namespaces are the labels "
                f"joined by {SEPARATOR!r}, so a label must be a non-empty string without {SEPARATOR!r}"
            )
        problem = text_problem(label)
        if problem:  # the name is looked up in PostgreSQL, which cannot take it
            raise InvalidNamespaceError(f"invalid namespace label {label!r} in {tuple(path)}: it {problem}")
    return SEPARATOR.join(path)


def _path(info: NamespaceInfo) -> tuple[str, ...]:
    return tuple(info.name.split(SEPARATOR))


def _does_match(condition: MatchCondition, path: tuple[str, ...]) -> bool:
    pattern = condition.path
    if len(path) < len(pattern):
        return False
    labels = path[: len(pattern)] if condition.match_type == "prefix" else path[len(path) - len(pattern):]
    return all(p in ("*", label) for p, label in zip(pattern, labels, strict=True))


class MemoryStoreView(BaseStore):
    """A read-only `BaseStore` over a `MemoryStore`: get, search (semantic with `embeddings`) and
    list_namespaces; put and delete raise `ReadOnlyMemoryError`.

    Searches see every item of a namespace, hot rules included; a namespace prefix searches every
    namespace below it (with a query, those whose embedding model and dimension fit `embeddings`).
    """

    def __init__(self, store: MemoryStore, *, embeddings: Embeddings | None = None) -> None:
        self.store = store
        self.embeddings = embeddings
        self._static = get_policy("static")  # relevance only, no hot tier: hot rules are searchable too

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        writes = [op for op in ops if isinstance(op, PutOp)]
        if writes:
            raise ReadOnlyMemoryError(
                f"cannot {'delete' if writes[0].value is None else 'put'} {writes[0].key!r} in "
                f"{writes[0].namespace}: the LangGraph store view of kernelsage's memory is read-only. "
                "Memory changes through its own path, so that every change is credited and audited: "
                "Memory.commit_episode (an episode's credit and experiences), Memory.add_items (new items) "
                "or `kernelsage memory seed` (a knowledge pack)"
            )
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ConfigurationError(f"unknown store operation {type(op).__name__}")

    def _memory(self, info: NamespaceInfo) -> Memory:
        return Memory(self.store, info, embeddings=self.embeddings, policy=self._static, read_only=True)

    def _get(self, op: GetOp) -> Item | None:
        info = self.store.namespace_info(_namespace_name(op.namespace))
        item_id = int(op.key) if op.key.isascii() and op.key.isdigit() else None
        if info is None or item_id is None or str(item_id) != op.key:  # keys are ids as str() writes them
            return None
        try:
            item = self._memory(info).get_item(item_id)
        except NamespaceError:
            return None
        return Item(value=item_value(item), key=op.key, namespace=_path(info),
                    created_at=item.created_at, updated_at=item.updated_at)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        _namespace_name(prefix)  # checks the labels
        if op.query is not None:
            check_query_text(op.query)
        targets = [n for n in self.store.list_namespaces() if _path(n)[: len(prefix)] == prefix]
        want = op.offset + op.limit
        if want <= 0 or not targets:
            return []
        state = (op.filter or {}).get("state")  # narrows the scan without a query; _matches still decides
        if isinstance(state, str) and state not in LIFECYCLE_STATES:
            return []  # no item is in that state (and the database is not asked about a text it may not hold)
        vector = None
        if op.query:
            vector, targets = self._query_vector(op.query, prefix, targets)
        found: list[Found] = []
        for info in targets:
            memory = self._memory(info)
            fetch = partial(_nearest, memory, vector) if vector is not None else partial(
                _by_utility, memory, state if isinstance(state, str) else None)
            found += _first_matches(info, fetch, op.filter, want)
        found.sort(key=lambda f: (-(f[3] if vector is not None else f[1].utility), f[0].name, f[1].id))
        return [
            SearchItem(namespace=_path(info), key=str(item.id), value=value, created_at=item.created_at,
                       updated_at=item.updated_at, score=score)
            for info, item, value, score in found[op.offset: want]
        ]

    def _query_vector(self, query: str, prefix: tuple[str, ...],
                      targets: list[NamespaceInfo]) -> tuple[list[float], list[NamespaceInfo]]:
        """The query's embedding and the namespaces it can search (same model, or precomputed, and dimension)."""
        if self.embeddings is None:
            raise ConfigurationError("a search with a query needs embeddings: MemoryStoreView(store, embeddings=...)")
        vector = self.embeddings.embed_query(query)
        model = embedding_name(self.embeddings)
        usable = [n for n in targets if n.embedding_model in (model, "precomputed") and n.embedding_dim == len(vector)]
        if not usable:
            built = ", ".join(sorted({f"{n.embedding_model} ({n.embedding_dim})" for n in targets}))
            raise NamespaceError(
                f"no namespace under {prefix} can be searched with embeddings {model!r} ({len(vector)} "
                f"dimensions): they were built with {built}; pass those embeddings to MemoryStoreView"
            )
        return vector, usable

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        paths = [_path(n) for n in self.store.list_namespaces()]
        paths = [p for p in paths if all(_does_match(c, p) for c in op.match_conditions or ())]
        unique = sorted({p[: op.max_depth] for p in paths} if op.max_depth is not None else set(paths))
        return unique[op.offset: op.offset + op.limit]


def _nearest(memory: Memory, vector: list[float], size: int) -> list[tuple[MemoryItem, float | None]]:
    return list(memory.relevance_pool(vector, size=size))


def _by_utility(memory: Memory, state: str | None, size: int) -> list[tuple[MemoryItem, float | None]]:
    return [(item, None) for item in memory.list_items(state=state, limit=size)]


def _first_matches(info: NamespaceInfo, fetch: Callable[[int], list[tuple[MemoryItem, float | None]]],
                   conditions: dict[str, Any] | None, want: int) -> list[Found]:
    """The first `want` items `fetch` returns that pass the filter, asking for more while some are
    filtered out and the namespace may hold more."""
    size = want
    while True:
        rows = fetch(size)
        kept = [(info, item, value, score) for item, score in rows
                if _matches(value := item_value(item), conditions)]
        if len(kept) >= want or len(rows) < size:
            return kept[:want]
        size *= 4

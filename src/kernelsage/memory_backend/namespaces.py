"""Namespaces: one memory each, with a fixed embedding dimension and model and its own vector index."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.errors import EmbeddingDimensionError, NamespaceError
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import run_transaction, transaction
from kernelsage.memory_backend.item_rows import embed_items, insert_items
from kernelsage.memory_backend.items import NamespaceInfo, NewItem
from kernelsage.memory_backend.tokens import TokenCounter, approx_token_count
from kernelsage.memory_backend.validation import check_new_items

if TYPE_CHECKING:  # only annotations: a memory command must not load the model stack
    from langchain_core.embeddings import Embeddings

MAX_DIM = 2000  # pgvector's HNSW limit for `vector`


def deleted(name: str) -> NamespaceError:
    """The error for a handle whose namespace was deleted while it was open."""
    return NamespaceError(f"namespace {name!r} was deleted")


@dataclass(frozen=True, kw_only=True)
class RunNamespace:
    """A namespace's place in a run: `<starting namespace>@<run id>/<policy>`, the copy one policy of one
    run learns in (an empty run id and policy for a namespace made by hand or imported)."""

    name: str
    start: str
    run_id: str = ""
    policy: str = ""


def run_namespace(start: str, run_id: str, policy: str) -> str:
    """The name of the namespace a run's policy learns in, from the starting namespace."""
    return f"{start}@{run_id}/{policy}"


def parse_run_namespace(name: str) -> RunNamespace:
    """The starting namespace, run id and policy a namespace name holds (see `run_namespace`)."""
    start, at, rest = name.rpartition("@")
    run_id, slash, policy = rest.rpartition("/")
    if not at or not slash or not start or not run_id or not policy:
        return RunNamespace(name=name, start=name)
    return RunNamespace(name=name, start=start, run_id=run_id, policy=policy)


def namespaces_of_run(names: Iterable[str], run_id: str, policy: str | None = None) -> list[str]:
    """The namespaces a run learned in (of one policy, when given), in name order."""
    found = [parse_run_namespace(name) for name in names]
    return sorted(n.name for n in found if n.run_id == run_id and (policy is None or n.policy == policy))


def list_namespaces(conn: psycopg.Connection) -> list[NamespaceInfo]:
    return [NamespaceInfo(**r) for r in conn.execute(q.NAMESPACES).fetchall()]


def namespace_info(conn: psycopg.Connection, name: str) -> NamespaceInfo | None:
    row = conn.execute(q.NAMESPACE_BY_NAME, (name,)).fetchone()
    return NamespaceInfo(**row) if row else None


def current_info(conn: psycopg.Connection, name: str) -> NamespaceInfo:
    """The namespace as it is now (counters included); an error when it no longer exists."""
    info = namespace_info(conn, name)
    if info is None:
        raise deleted(name)
    return info


def counters(conn: psycopg.Connection, info: NamespaceInfo, *, for_update: bool = False) -> dict[str, int]:
    """The namespace's episode sequence and hot-memory version; `for_update` locks its row until the
    transaction ends, which serialises the commits (and numbers them) and the hot-memory changes."""
    return send_counters(conn, info, for_update=for_update)()


def send_counters(conn: psycopg.Connection, info: NamespaceInfo, *,
                  for_update: bool = False) -> Callable[[], dict[str, int]]:
    """`counters` in two steps: the query is sent now, its row read by the function returned (in pipeline
    mode, queries sent before the first read travel to the server together)."""
    cursor = conn.execute(q.COUNTERS_FOR_UPDATE if for_update else q.COUNTERS, (info.id,))

    def read() -> dict[str, int]:
        row = cursor.fetchone()
        if row is None:
            raise deleted(info.name)
        return row
    return read


def _dimension_mismatch(name: str, stored: int, asked: int) -> EmbeddingDimensionError:
    return EmbeddingDimensionError(f"namespace {name!r} stores {stored}-dimensional embeddings, not {asked}")


def create_namespace(conn: psycopg.Connection, name: str, *, embedding_dim: int,
                     embedding_model: str) -> NamespaceInfo:
    """Create a namespace (idempotent when the dimension agrees), with its vector index when no index build
    is under way (see `create_if_missing`)."""
    info, _ = create_if_missing(conn, name, embedding_dim=embedding_dim, embedding_model=embedding_model)
    return info


def create_if_missing(conn: psycopg.Connection, name: str, *, embedding_dim: int,
                      embedding_model: str) -> tuple[NamespaceInfo, bool]:
    """The namespace, and whether this transaction created it. Of several transactions creating one name at
    once, exactly one gets True: the others wait for it, then find it.

    The creating transaction builds the namespace's one-list vector index only when it gets the index-build
    lock at once (`_index_turn`); otherwise the namespace starts without one, is searched exactly all the
    same (by reading the vectors table), and the check `vector_index.maintain` makes at its opening and
    after its writes builds the index in its turn."""
    if not name or len(name) > 200 or "\x00" in name:
        raise NamespaceError("a namespace name must be 1 to 200 characters long, without NUL characters")
    if not 1 <= embedding_dim <= MAX_DIM:
        raise EmbeddingDimensionError(f"embedding dimension {embedding_dim} is outside 1..{MAX_DIM}")
    created = conn.execute(q.INSERT_NAMESPACE, (name, embedding_dim, embedding_model)).fetchone() is not None
    info = namespace_info(conn, name)
    assert info is not None
    if info.embedding_dim != embedding_dim:
        raise _dimension_mismatch(name, info.embedding_dim, embedding_dim)
    if created and _index_turn(conn):
        conn.execute(q.create_vector_index(info.id, embedding_dim))
    return info, created


def _index_turn(conn: psycopg.Connection) -> bool:
    """Whether the transaction now holds the index-build lock (until it ends); never waits for it.

    The plain CREATE INDEX of a creating transaction waits for every CREATE or DROP INDEX CONCURRENTLY on the
    shared vectors table, and such a build waits in turn for every transaction that could see the table: a
    creator that met a build under way closed a cycle that the server broke as a deadlock (4 to 23 in a run
    of tests/memory/test_namespace_churn.py). Those builds and drops run only under
    this lock (`vector_index._build_lock`), so while a creator holds it none is under way, and none starts
    before the creator commits.
    """
    return conn.execute(q.VECTOR_INDEX_XACT_LOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL)).fetchone()["locked"]


def delete_namespace(conn: psycopg.Connection, name: str) -> bool:
    """Delete a namespace with everything in it; False when there was none of that name. Its vector
    indexes stay until `vector_index.drop_orphaned` drops them in its turn (they index no rows meanwhile):
    the transaction takes no lock on the shared vectors table that a concurrent build could wait for."""
    return conn.execute(q.DELETE_NAMESPACE, (name,)).fetchone() is not None


def resolve(pool: ConnectionPool, name: str, *, embeddings: Embeddings | None, embedding_dim: int | None,
            create: bool, seed: Callable[[], Sequence[NewItem]] | None = None,
            token_counter: TokenCounter = approx_token_count) -> NamespaceInfo:
    """The namespace a handle opens: created on first use when `create`, else it must exist; the
    dimension and the embedding model asked for must agree with the ones it was created with.

    `seed` gives the items a new namespace starts with, stored in the transaction that creates it
    (by whichever concurrent opener creates it, and only by that one)."""
    with transaction(pool) as conn:
        info = namespace_info(conn, name)
    model = "precomputed"
    if embeddings is not None:  # embeddings.py loads langchain_core: a memory command without a model never does
        from kernelsage.memory_backend.embeddings import embedding_name

        model = embedding_name(embeddings)
    if info is None:
        if not create:  # other namespaces are not named: in a shared database they can be other teams'
            raise NamespaceError(f"namespace {name!r} does not exist; `kernelsage memory namespaces` lists those "
                                 "that do")
        if embedding_dim is None:
            if embeddings is None:
                raise NamespaceError(f"creating namespace {name!r} needs embeddings or an embedding_dim")
            embedding_dim = len(embeddings.embed_query("kernelsage dimension probe"))
        items = list(seed()) if seed is not None else []
        if items:
            check_new_items(items)
            vectors = embed_items(items, embeddings, embedding_dim)

        def work(conn: psycopg.Connection) -> NamespaceInfo:
            info, created = create_if_missing(conn, name, embedding_dim=embedding_dim,  # type: ignore[arg-type]
                                              embedding_model=model)
            if created and items:
                insert_items(conn, info.id, items, vectors, 0, token_counter)
            return info

        return run_transaction(pool, work)
    if embedding_dim is not None and embedding_dim != info.embedding_dim:
        raise _dimension_mismatch(name, info.embedding_dim, embedding_dim)
    if embeddings is not None and info.embedding_model not in (model, "precomputed"):
        raise NamespaceError(
            f"namespace {name!r} was built with embeddings {info.embedding_model!r}, not {model!r}: "
            "searching it with another model's vectors would return unrelated items"
        )
    return info

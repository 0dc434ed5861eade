"""Namespaces: one memory each, with a fixed embedding dimension and model and its own vector index."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from langchain_core.embeddings import Embeddings
from psycopg_pool import ConnectionPool

from kernelsage.errors import EmbeddingDimensionError, NamespaceError
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import run_transaction, transaction
from kernelsage.memory_backend.embeddings import embedding_name
from kernelsage.memory_backend.items import NamespaceInfo, NewItem
from kernelsage.memory_backend.tokens import TokenCounter, approx_token_count

MAX_DIM = 2000  # pgvector's HNSW limit for `vector`


def deleted(name: str) -> NamespaceError:
    """The error for a handle whose namespace was deleted while it was open."""
    return NamespaceError(f"namespace {name!r} was deleted")


def checked_vector(values: Sequence[float] | np.ndarray, dim: int, what: str) -> np.ndarray:
    """`values` as a float32 vector, checked against the namespace's dimension and for NaN and infinity."""
    array = np.asarray(values, dtype=np.float32)
    if array.ndim != 1 or array.shape[0] != dim:
        raise EmbeddingDimensionError(
            f"{what} has dimension {array.shape[-1] if array.ndim else 0}, but this namespace stores "
            f"{dim}-dimensional embeddings; use the embedding model the namespace was created with"
        )
    if not np.all(np.isfinite(array)):
        raise EmbeddingDimensionError(f"{what} contains NaN or infinite values")
    # Cosine similarity divides by the length: a zero vector (or one whose squared length pgvector's float32
    # arithmetic rounds to 0 or infinity) would give NaN relevance, which no commit can record.
    with np.errstate(over="ignore", under="ignore"):
        squared = float(np.dot(array, array))
    if not 0.0 < squared < np.inf:
        length = float(np.linalg.norm(array.astype(np.float64)))
        raise EmbeddingDimensionError(
            f"{what} has length {length:.3g}: cosine similarity needs a vector that is not zero "
            "(nor so short or long that its squared length leaves float32's range); check the embedding's source"
        )
    return array


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
    """Create a namespace (idempotent when the dimension agrees) and its vector index."""
    info, _ = create_if_missing(conn, name, embedding_dim=embedding_dim, embedding_model=embedding_model)
    return info


def create_if_missing(conn: psycopg.Connection, name: str, *, embedding_dim: int,
                      embedding_model: str) -> tuple[NamespaceInfo, bool]:
    """The namespace, and whether this transaction created it (then with its vector index). Of several
    transactions creating one name at once, exactly one gets True: the others wait for it, then find it."""
    if not name or len(name) > 200 or "\x00" in name:
        raise NamespaceError("a namespace name must be 1 to 200 characters long, without NUL characters")
    if not 1 <= embedding_dim <= MAX_DIM:
        raise EmbeddingDimensionError(f"embedding dimension {embedding_dim} is outside 1..{MAX_DIM}")
    created = conn.execute(q.INSERT_NAMESPACE, (name, embedding_dim, embedding_model)).fetchone() is not None
    info = namespace_info(conn, name)
    assert info is not None
    if info.embedding_dim != embedding_dim:
        raise _dimension_mismatch(name, info.embedding_dim, embedding_dim)
    if created:
        conn.execute(q.create_vector_index(info.id, embedding_dim))
    return info, created


def delete_namespace(conn: psycopg.Connection, name: str) -> bool:
    """Delete a namespace with everything in it; False when there was none of that name. Its vector
    indexes stay until `vector_index.drop_orphaned` drops them (they index no rows meanwhile)."""
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
        known = [n.name for n in list_namespaces(conn)] if info is None and not create else []
    model = embedding_name(embeddings) if embeddings is not None else "precomputed"
    if info is None:
        if not create:
            raise NamespaceError(f"namespace {name!r} does not exist (known: {', '.join(known) or 'none'})")
        if embedding_dim is None:
            if embeddings is None:
                raise NamespaceError(f"creating namespace {name!r} needs embeddings or an embedding_dim")
            embedding_dim = len(embeddings.embed_query("kernelsage dimension probe"))
        items = list(seed()) if seed is not None else []
        if items:
            from kernelsage.memory_backend.item_rows import embed_items, insert_items
            from kernelsage.memory_backend.validation import check_new_items

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

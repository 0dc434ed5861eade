"""All SQL of the memory: schema migrations, items, retrieval, the episode commit, consolidation.

The store never calls a model: embeddings and rule abstraction arrive as objects and callables.
Every multi-statement change runs in one transaction, so a failure leaves memory as it was.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from langchain_core.embeddings import Embeddings
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from kernelsage.errors import (
    EmbeddingDimensionError,
    EpisodeError,
    NamespaceError,
    ReadOnlyMemoryError,
)
from kernelsage.memory_backend import ugc
from kernelsage.memory_backend.database import database_url, open_pool
from kernelsage.memory_backend.embeddings import embedding_name
from kernelsage.memory_backend.items import (
    CommitResult,
    ConsolidationResult,
    MemoryItem,
    NamespaceInfo,
    NewItem,
    Retrieval,
    ShownItem,
)
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy, get_policy
from kernelsage.memory_backend.records import (
    EpisodeTrace,
    Exposure,
    ItemStats,
    PoolEntry,
    RoundOutcome,
    Stage,
)
from kernelsage.memory_backend.tokens import TokenCounter, approx_token_count

RuleAbstractor = Callable[[MemoryItem], str]


def _keep_source_text(item: MemoryItem) -> str:
    """The default abstraction: the source text itself, until a model is passed in to rewrite it."""
    return item.text
MAX_DIM = 2000  # pgvector's HNSW limit for `vector`
_LOCK_CLASS = 0x4B53  # advisory-lock key space of kernelsage ("KS"); the second key is the namespace id

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "namespaces, items, episodes, exposures, credits, hot-memory history",
        """
        CREATE TABLE ks_namespaces (
            id serial PRIMARY KEY,
            name text NOT NULL UNIQUE,
            embedding_dim int NOT NULL CHECK (embedding_dim BETWEEN 1 AND 2000),
            embedding_model text NOT NULL,
            episode_seq bigint NOT NULL DEFAULT 0,
            hot_version bigint NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE ks_items (
            id bigserial PRIMARY KEY,
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            kind text NOT NULL DEFAULT 'experience',
            text text NOT NULL,
            evidence text NOT NULL DEFAULT '',
            code_example text,
            operator text,
            source_episode text,
            tokens int NOT NULL CHECK (tokens > 0),
            rule_text text,
            rule_tokens int CHECK (rule_tokens > 0),
            abstracted_at timestamptz,
            utility double precision NOT NULL DEFAULT 0,
            n_ret int NOT NULL DEFAULT 0,
            n_ret_cold int NOT NULL DEFAULT 0,
            n_ado int NOT NULL DEFAULT 0,
            adopting_ops text[] NOT NULL DEFAULT '{}',
            access double precision NOT NULL DEFAULT 0,
            q_draft double precision NOT NULL DEFAULT 0,
            q_refine double precision NOT NULL DEFAULT 0,
            state text NOT NULL DEFAULT 'cold' CHECK (state IN ('cold', 'validated', 'hot')),
            eligible_banked bigint NOT NULL DEFAULT 0,
            eligible_since bigint,
            metadata jsonb NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            promoted_at timestamptz,
            demoted_at timestamptz
        );
        -- Statistics change after every episode, so leave room on each page for HOT updates.
        ALTER TABLE ks_items SET (fillfactor = 85);
        CREATE INDEX ks_items_namespace_state ON ks_items (namespace_id, state);
        -- Vectors live apart from the statistics: an episode commit never touches an HNSW index.
        -- `resident` mirrors state = 'hot' (changed only on promotion and demotion) so the
        -- filtered vector search needs no join.
        CREATE TABLE ks_item_vectors (
            item_id bigint PRIMARY KEY REFERENCES ks_items(id) ON DELETE CASCADE,
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            resident boolean NOT NULL DEFAULT false,
            embedding vector NOT NULL
        );
        CREATE TABLE ks_episodes (
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            episode_id text NOT NULL,
            seq bigint NOT NULL,
            policy text NOT NULL,
            operator text NOT NULL,
            level int,
            t_first double precision,
            t_best double precision,
            terminal_score double precision NOT NULL,
            hot_version_seen bigint,
            rounds jsonb NOT NULL DEFAULT '[]',
            metadata jsonb NOT NULL DEFAULT '{}',
            committed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace_id, episode_id)
        );
        CREATE TABLE ks_exposures (
            namespace_id int NOT NULL,
            episode_id text NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            round int NOT NULL,
            tier text NOT NULL CHECK (tier IN ('hot', 'cold')),
            stage text NOT NULL CHECK (stage IN ('draft', 'refine')),
            relevance double precision,
            score double precision,
            adopted boolean NOT NULL,
            rationale text NOT NULL DEFAULT '',
            PRIMARY KEY (namespace_id, episode_id, item_id, round),
            FOREIGN KEY (namespace_id, episode_id) REFERENCES ks_episodes ON DELETE CASCADE
        );
        CREATE TABLE ks_credits (
            namespace_id int NOT NULL,
            episode_id text NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            credit double precision NOT NULL,
            utility_before double precision NOT NULL,
            utility_after double precision NOT NULL,
            PRIMARY KEY (namespace_id, episode_id, item_id),
            FOREIGN KEY (namespace_id, episode_id) REFERENCES ks_episodes ON DELETE CASCADE
        );
        CREATE TABLE ks_hot_events (
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            hot_version bigint NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            event text NOT NULL CHECK (event IN ('promoted', 'demoted')),
            priority double precision,
            at timestamptz NOT NULL DEFAULT now()
        );
        """,
    ),
)

_NAMESPACE_COLUMNS = "id, name, embedding_dim, embedding_model, episode_seq, hot_version, created_at"
_ITEM_COLUMNS = sql.SQL(
    "id, kind, text, evidence, code_example, operator, source_episode, rule_text, tokens, rule_tokens, "
    "utility, n_ret, n_ret_cold, n_ado, adopting_ops, access, q_draft, q_refine, state, metadata, "
    "created_at, updated_at, promoted_at, demoted_at"
)
_STATS_COLUMNS = sql.SQL(
    "id, utility, n_ret, n_ret_cold, n_ado, adopting_ops, access, q_draft, q_refine, state, "
    "COALESCE(rule_tokens, tokens), "
    "eligible_banked + COALESCE(%(seq)s - eligible_since, 0), "
    "rule_text IS NOT NULL"
)


def _to_item(row: dict[str, Any]) -> MemoryItem:
    return MemoryItem(**{**row, "adopting_ops": tuple(sorted(row["adopting_ops"]))})


def _fetch_stats(conn: psycopg.Connection, condition: sql.Composable,
                 params: dict[str, Any]) -> list[tuple[ItemStats, bool]]:
    """Statistics of the items matching `condition` (with `seq` in params for the eligible-episode
    count), each with whether it already has an abstracted rule. Binary tuples: consolidation reads
    thousands of rows per episode."""
    query = sql.SQL("SELECT {} FROM ks_items WHERE {}").format(_STATS_COLUMNS, condition)
    with conn.cursor(row_factory=tuple_row, binary=True) as cursor:
        rows = cursor.execute(query, params).fetchall()
    return [
        (ItemStats(r[0], r[1], r[2], r[3], r[4], frozenset(r[5]), r[6], int(r[11]), r[9], r[10], r[7], r[8]), r[12])
        for r in rows
    ]


def _vector(values: Sequence[float] | np.ndarray, dim: int, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float32)
    if array.ndim != 1 or array.shape[0] != dim:
        raise EmbeddingDimensionError(
            f"{what} has dimension {array.shape[-1] if array.ndim else 0}, but this namespace stores "
            f"{dim}-dimensional embeddings; use the embedding model the namespace was created with"
        )
    if not np.all(np.isfinite(array)):
        raise EmbeddingDimensionError(f"{what} contains NaN or infinite values")
    return array


class MemoryStore:
    """The memory database: namespaces over one connection pool, migrated at open."""

    def __init__(self, pool: ConnectionPool, *, params: SageParams | None = None,
                 token_counter: TokenCounter = approx_token_count, owns_pool: bool = False) -> None:
        self.pool = pool
        self.params = params or SageParams()
        self.token_counter = token_counter
        self._owns_pool = owns_pool
        self.migrate()

    @classmethod
    def connect(cls, url: str | None = None, **kwargs: Any) -> MemoryStore:
        """Open the store at url (default: DATABASE_URL or the embedded server)."""
        return cls(open_pool(url or database_url()), owns_pool=True, **kwargs)

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    def migrate(self) -> list[int]:
        """Apply the migrations this database lacks, under a lock; returns the versions applied now."""
        applied: list[int] = []
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_CLASS,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ks_schema_migrations ("
                "version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["version"] for r in conn.execute("SELECT version FROM ks_schema_migrations")}
            for version, name, statements in MIGRATIONS:
                if version in done:
                    continue
                conn.execute(statements)  # type: ignore[arg-type]  # fixed DDL text of this module
                conn.execute("INSERT INTO ks_schema_migrations (version, name) VALUES (%s, %s)", (version, name))
                applied.append(version)
        return applied

    def applied_migrations(self) -> list[int]:
        with self._transaction() as conn:
            return [r["version"] for r in conn.execute("SELECT version FROM ks_schema_migrations ORDER BY 1")]

    # -- namespaces -------------------------------------------------------------------------------

    def list_namespaces(self) -> list[NamespaceInfo]:
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {_NAMESPACE_COLUMNS} FROM ks_namespaces ORDER BY name").fetchall()
        return [NamespaceInfo(**r) for r in rows]

    def namespace_info(self, name: str) -> NamespaceInfo | None:
        with self._transaction() as conn:
            row = conn.execute(f"SELECT {_NAMESPACE_COLUMNS} FROM ks_namespaces WHERE name = %s", (name,)).fetchone()
        return NamespaceInfo(**row) if row else None

    def create_namespace(self, name: str, *, embedding_dim: int, embedding_model: str) -> NamespaceInfo:
        """Create a namespace (idempotent when the dimension and model agree) and its vector index."""
        if not name or len(name) > 200:
            raise NamespaceError("a namespace name must be 1 to 200 characters long")
        if not 1 <= embedding_dim <= MAX_DIM:
            raise EmbeddingDimensionError(f"embedding dimension {embedding_dim} is outside 1..{MAX_DIM}")
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO ks_namespaces (name, embedding_dim, embedding_model) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (name, embedding_dim, embedding_model),
            )
            row = conn.execute(
                f"SELECT {_NAMESPACE_COLUMNS} FROM ks_namespaces WHERE name = %s", (name,)
            ).fetchone()
            assert row is not None
            if row["embedding_dim"] != embedding_dim:
                raise EmbeddingDimensionError(
                    f"namespace {name!r} stores {row['embedding_dim']}-dimensional embeddings, not {embedding_dim}"
                )
            # One partial HNSW index per namespace: a search never sees another namespace's vectors,
            # and the namespace filter costs nothing.
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {index} ON ks_item_vectors USING hnsw "
                    "((embedding::vector({dim})) vector_cosine_ops) WHERE namespace_id = {ns}"
                ).format(
                    index=sql.Identifier(f"ks_item_vectors_hnsw_ns{row['id']}"),
                    dim=sql.Literal(embedding_dim),
                    ns=sql.Literal(row["id"]),
                )
            )
        return NamespaceInfo(**row)

    def open(
        self,
        name: str,
        *,
        embeddings: Embeddings | None = None,
        embedding_dim: int | None = None,
        policy: str | MemoryPolicy = "sage",
        read_only: bool = False,
        create: bool = True,
    ) -> Memory:
        """A handle on one namespace, created on first use unless read_only or create=False."""
        info = self.namespace_info(name)
        model = embedding_name(embeddings) if embeddings is not None else "precomputed"
        if info is None:
            if read_only or not create:
                known = ", ".join(n.name for n in self.list_namespaces()) or "none"
                raise NamespaceError(f"namespace {name!r} does not exist (known: {known})")
            if embedding_dim is None:
                if embeddings is None:
                    raise NamespaceError(f"creating namespace {name!r} needs embeddings or an embedding_dim")
                embedding_dim = len(embeddings.embed_query("kernelsage dimension probe"))
            info = self.create_namespace(name, embedding_dim=embedding_dim, embedding_model=model)
        elif embedding_dim is not None and embedding_dim != info.embedding_dim:
            raise EmbeddingDimensionError(
                f"namespace {name!r} stores {info.embedding_dim}-dimensional embeddings, not {embedding_dim}"
            )
        elif embeddings is not None and info.embedding_model not in (model, "precomputed"):
            raise NamespaceError(
                f"namespace {name!r} was built with embeddings {info.embedding_model!r}, not {model!r}: "
                "searching it with another model's vectors would return unrelated items"
            )
        chosen = policy if isinstance(policy, MemoryPolicy) else get_policy(policy)
        return Memory(self, info, embeddings=embeddings, policy=chosen, read_only=read_only)

    def delete_namespace(self, name: str) -> bool:
        with self._transaction() as conn:
            row = conn.execute("DELETE FROM ks_namespaces WHERE name = %s RETURNING id", (name,)).fetchone()
            if row is not None:
                index = sql.Identifier(f"ks_item_vectors_hnsw_ns{row['id']}")
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(index))
        return row is not None


class Memory:
    """One namespace seen through one memory policy; read-only handles refuse every update."""

    def __init__(self, store: MemoryStore, info: NamespaceInfo, *, embeddings: Embeddings | None,
                 policy: MemoryPolicy, read_only: bool) -> None:
        self.store = store
        self.info = info
        self.embeddings = embeddings
        self.policy = policy
        self.read_only = read_only
        self.params = store.params

    @property
    def name(self) -> str:
        return self.info.name

    def _writable(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyMemoryError(
                f"cannot {action}: namespace {self.name!r} is open read-only (a frozen memory); "
                "open it without read_only to change it"
            )

    def _vector_sql(self) -> sql.Composable:
        return sql.SQL("embedding::vector({})").format(sql.Literal(self.info.embedding_dim))

    # -- items ------------------------------------------------------------------------------------

    def add_items(self, items: Sequence[NewItem]) -> list[int]:
        """Store new cold items (embedding missing ones) in one transaction; returns their ids."""
        self._writable("add items")
        if not items:
            return []
        vectors = self._embed(items)
        with self.store._transaction() as conn:
            seq = conn.execute("SELECT episode_seq FROM ks_namespaces WHERE id = %s", (self.info.id,)).fetchone()
            if seq is None:
                raise NamespaceError(f"namespace {self.name!r} was deleted")
            return self._insert_items(conn, items, vectors, seq["episode_seq"])

    def _embed(self, items: Sequence[NewItem]) -> list[np.ndarray]:
        """Every item's vector, checked against the namespace's dimension; computed where missing."""
        missing = [i for i, item in enumerate(items) if item.embedding is None]
        computed: dict[int, list[float]] = {}
        if missing:
            if self.embeddings is None:
                raise NamespaceError("items without an embedding need the memory to be opened with embeddings")
            vectors = self.embeddings.embed_documents([items[i].text for i in missing])
            computed = dict(zip(missing, vectors, strict=True))
        return [
            _vector(computed.get(i, item.embedding), self.info.embedding_dim, f"embedding of item {i}")  # type: ignore[arg-type]
            for i, item in enumerate(items)
        ]

    def _insert_items(self, conn: psycopg.Connection, items: Sequence[NewItem], vectors: Sequence[np.ndarray],
                      seq: int) -> list[int]:
        if not items:
            return []
        count = self.store.token_counter
        ids = [r["id"] for r in conn.execute(
            "SELECT nextval('ks_items_id_seq') AS id FROM generate_series(1, %s)", (len(items),))]
        with conn.cursor().copy(
            "COPY ks_items (id, namespace_id, kind, text, evidence, code_example, operator, source_episode, "
            "tokens, metadata, eligible_since) FROM STDIN"
        ) as copy:
            for item_id, item in zip(ids, items, strict=True):
                copy.write_row((
                    item_id, self.info.id, item.kind, item.text, item.evidence, item.code_example,
                    item.operator, item.source_episode, count(item.text), Jsonb(item.metadata), seq,
                ))
        with conn.cursor().copy("COPY ks_item_vectors (item_id, namespace_id, embedding) FROM STDIN") as copy:
            for item_id, vector in zip(ids, vectors, strict=True):
                copy.write_row((item_id, self.info.id, vector))
        return ids

    def get_item(self, item_id: int) -> MemoryItem:
        with self.store._transaction() as conn:
            row = conn.execute(
                sql.SQL("SELECT {} FROM ks_items WHERE namespace_id = %s AND id = %s").format(_ITEM_COLUMNS),
                (self.info.id, item_id),
            ).fetchone()
        if row is None:
            raise NamespaceError(f"namespace {self.name!r} has no item {item_id}")
        return _to_item(row)

    def count_items(self, *, kind: str | None = None) -> int:
        """How many items the namespace holds (of one kind: experience, knowledge, rule)."""
        with self.store._transaction() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM ks_items WHERE namespace_id = %s AND (%s::text IS NULL OR kind = %s)",
                (self.info.id, kind, kind),
            ).fetchone()
        return int(row["n"])

    def list_items(self, *, state: str | None = None, limit: int = 50) -> list[MemoryItem]:
        """Items by descending utility (then id), optionally of one lifecycle state."""
        with self.store._transaction() as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT {} FROM ks_items WHERE namespace_id = %s AND (%s::text IS NULL OR state = %s) "
                    "ORDER BY utility DESC, id LIMIT %s"
                ).format(_ITEM_COLUMNS),
                (self.info.id, state, state, limit),
            ).fetchall()
        return [_to_item(r) for r in rows]

    def hot_rules(self) -> list[MemoryItem]:
        """The resident hot rules (empty for policies without hot memory)."""
        with self.store._transaction() as conn:
            return self._hot_rules(conn)

    def _hot_rules(self, conn: psycopg.Connection) -> list[MemoryItem]:
        if not self.policy.uses_hot_memory:
            return []
        rows = conn.execute(
            sql.SQL("SELECT {} FROM ks_items WHERE namespace_id = %s AND state = 'hot' ORDER BY id").format(
                _ITEM_COLUMNS),
            (self.info.id,),
        ).fetchall()
        return [_to_item(r) for r in rows]

    # -- retrieval --------------------------------------------------------------------------------

    def relevance_pool(self, query: Sequence[float] | np.ndarray, *, size: int) -> list[tuple[MemoryItem, float]]:
        """The `size` retrievable items nearest to the query by cosine similarity, nearest first."""
        with self.store._transaction() as conn:
            return self._relevance_pool(conn, query, size)

    def _relevance_pool(self, conn: psycopg.Connection, query: Sequence[float] | np.ndarray,
                        size: int) -> list[tuple[MemoryItem, float]]:
        vector = _vector(query, self.info.embedding_dim, "the query embedding")
        exclude_hot = self.policy.uses_hot_memory  # resident rules are shown anyway, never retrieved
        column = self._vector_sql()
        query_sql = sql.SQL(
            "SELECT {cols}, nearest.relevance FROM ("
            "SELECT item_id, 1 - ({column} <=> %(q)s) AS relevance FROM ks_item_vectors "
            "WHERE namespace_id = {ns} {hot_filter} ORDER BY {column} <=> %(q)s LIMIT %(n)s"
            ") AS nearest JOIN ks_items ON ks_items.id = nearest.item_id"
        ).format(
            cols=_ITEM_COLUMNS, column=column, ns=sql.Literal(self.info.id),
            hot_filter=sql.SQL("AND NOT resident") if exclude_hot else sql.SQL(""),
        )
        # Iterative scans keep a filtered HNSW search from returning fewer rows than asked for.
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true)",
            (str(max(self.params.ef_search, size)), "relaxed_order" if exclude_hot else "off"),
        )
        rows = conn.execute(query_sql, {"q": vector, "n": size}).fetchall()
        pool = [(_to_item({k: v for k, v in r.items() if k != "relevance"}), float(r["relevance"])) for r in rows]
        pool.sort(key=lambda pair: (-pair[1], pair[0].id))  # relaxed order must be re-sorted
        return pool

    def retrieve(
        self,
        query: str | Sequence[float] | np.ndarray,
        *,
        k: int | None = None,
        stage: Stage = "draft",
        rng: random.Random | None = None,
    ) -> Retrieval:
        """Cold items for a need (relevance pool, reranked late by the policy) plus the resident hot rules."""
        k = k or self.params.top_k
        if self.policy.retrieves and isinstance(query, str):
            if self.embeddings is None:
                raise NamespaceError("a text query needs the memory to be opened with embeddings")
            query = self.embeddings.embed_query(query)
        with self.store._transaction() as conn:  # one snapshot: the hot set and the pool agree
            version = conn.execute("SELECT hot_version FROM ks_namespaces WHERE id = %s", (self.info.id,)).fetchone()
            if version is None:
                raise NamespaceError(f"namespace {self.name!r} was deleted")
            hot = [ShownItem(item=i, tier="hot") for i in self._hot_rules(conn)]
            pool = self._relevance_pool(conn, query, max(self.params.pool_size, k)) if self.policy.retrieves else []
        by_id = {item.id: item for item, _ in pool}
        candidates = [
            PoolEntry(item_id=item.id, relevance=rel, utility=item.utility, q_draft=item.q_draft,
                      q_refine=item.q_refine)
            for item, rel in pool
        ]
        ranked = self.policy.rank(candidates, k=k, stage=stage, params=self.params, rng=rng or random.Random())
        cold = [ShownItem(item=by_id[c.item_id], tier="cold", relevance=c.relevance, score=c.score) for c in ranked]
        return Retrieval(cold=cold, hot=hot, hot_version=version["hot_version"])

    def info_now(self) -> NamespaceInfo:
        info = self.store.namespace_info(self.name)
        if info is None:
            raise NamespaceError(f"namespace {self.name!r} was deleted")
        return info

    # -- the episode commit ---------------------------------------------------------------------

    def commit_episode(self, episode: EpisodeTrace, new_items: Sequence[NewItem] = ()) -> CommitResult:
        """Record an episode, apply its credit and store the experiences it produced, in one
        transaction; idempotent per episode id (a repeat changes nothing and says so)."""
        self._writable("commit an episode")
        vectors = self._embed(new_items) if new_items else []
        with self.store._transaction() as conn:
            ns = conn.execute(
                "SELECT episode_seq FROM ks_namespaces WHERE id = %s FOR UPDATE", (self.info.id,)
            ).fetchone()
            if ns is None:
                raise NamespaceError(f"namespace {self.name!r} was deleted")
            previous = conn.execute(
                "SELECT terminal_score FROM ks_episodes WHERE namespace_id = %s AND episode_id = %s",
                (self.info.id, episode.episode_id),
            ).fetchone()
            if previous is not None:
                credits = conn.execute(
                    "SELECT item_id, credit FROM ks_credits WHERE namespace_id = %s AND episode_id = %s",
                    (self.info.id, episode.episode_id),
                ).fetchall()
                added = conn.execute(
                    "SELECT id FROM ks_items WHERE namespace_id = %s AND source_episode = %s ORDER BY id",
                    (self.info.id, episode.episode_id),
                ).fetchall()
                return CommitResult(episode_id=episode.episode_id, applied=False,
                                    terminal_score=previous["terminal_score"],
                                    credits={r["item_id"]: r["credit"] for r in credits},
                                    new_item_ids=[r["id"] for r in added])
            seq = ns["episode_seq"] + 1
            shown = sorted({e.item_id for e in episode.exposures})
            rows = _fetch_stats(conn, sql.SQL("namespace_id = %(ns)s AND id = ANY(%(ids)s) ORDER BY id FOR UPDATE"),
                                {"seq": seq, "ns": self.info.id, "ids": shown})
            stats = {s.item_id: s for s, _ in rows}
            unknown = [i for i in shown if i not in stats]
            if unknown:
                raise EpisodeError(f"episode {episode.episode_id!r} shows items {unknown} "
                                   f"that namespace {self.name!r} does not hold")
            update = self.policy.apply_episode(episode, stats, self.params)
            self._insert_episode(conn, episode, seq, update.terminal_score)
            self._write_learning(conn, episode.episode_id, stats, update.stats, update.credits)
            conn.execute("UPDATE ks_namespaces SET episode_seq = %s WHERE id = %s", (seq, self.info.id))
            new_ids = self._insert_items(
                conn, [replace(item, source_episode=episode.episode_id) for item in new_items], vectors, seq)
        return CommitResult(episode_id=episode.episode_id, applied=True,
                            terminal_score=update.terminal_score, credits=update.credits, new_item_ids=new_ids)

    def _insert_episode(self, conn: psycopg.Connection, episode: EpisodeTrace, seq: int, z: float) -> None:
        conn.execute(
            "INSERT INTO ks_episodes (namespace_id, episode_id, seq, policy, operator, level, t_first, t_best, "
            "terminal_score, hot_version_seen, rounds, metadata) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (self.info.id, episode.episode_id, seq, self.policy.name, episode.operator, episode.level,
             episode.t_first, episode.t_best, z, episode.hot_version_seen,
             Jsonb([r.__dict__ for r in episode.rounds]), Jsonb(episode.metadata)),
        )
        with conn.cursor().copy(
            "COPY ks_exposures (namespace_id, episode_id, item_id, round, tier, stage, relevance, score, adopted, "
            "rationale) FROM STDIN"
        ) as copy:
            for e in episode.exposures:
                copy.write_row((self.info.id, episode.episode_id, e.item_id, e.round, e.tier, e.stage,
                                e.relevance, e.score, e.adopted, e.rationale))

    def _write_learning(self, conn: psycopg.Connection, episode_id: str, before: dict[int, ItemStats],
                        after: dict[int, ItemStats], credits: dict[int, float]) -> None:
        if not after:
            return
        ids = sorted(after)
        new = [after[i] for i in ids]
        conn.execute(
            "UPDATE ks_items AS t SET utility = u.utility, n_ret = u.n_ret, n_ret_cold = u.n_ret_cold, "
            "n_ado = u.n_ado, adopting_ops = ARRAY(SELECT jsonb_array_elements_text(u.ops)), access = u.access, "
            "q_draft = u.q_draft, q_refine = u.q_refine, updated_at = now() "
            "FROM unnest(%s::bigint[], %s::float8[], %s::int[], %s::int[], %s::int[], %s::jsonb[], %s::float8[], "
            "%s::float8[], %s::float8[]) AS u(id, utility, n_ret, n_ret_cold, n_ado, ops, access, q_draft, q_refine) "
            "WHERE t.id = u.id",
            (ids, [s.utility for s in new], [s.n_ret for s in new], [s.n_ret_cold for s in new],
             [s.n_ado for s in new], [Jsonb(sorted(s.adopting_ops)) for s in new], [s.access for s in new],
             [s.q_draft for s in new], [s.q_refine for s in new]),
        )
        with conn.cursor().copy(
            "COPY ks_credits (namespace_id, episode_id, item_id, credit, utility_before, utility_after) FROM STDIN"
        ) as copy:
            for i in ids:
                copy.write_row((self.info.id, episode_id, i, credits.get(i, 0.0), before[i].utility,
                                after[i].utility))

    def episode_credits(self, episode_id: str) -> dict[int, tuple[float, float, float]]:
        """Stored (credit, utility before, utility after) per item of one committed episode, for audits."""
        with self.store._transaction() as conn:
            rows = conn.execute(
                "SELECT item_id, credit, utility_before, utility_after FROM ks_credits "
                "WHERE namespace_id = %s AND episode_id = %s",
                (self.info.id, episode_id),
            ).fetchall()
        return {r["item_id"]: (r["credit"], r["utility_before"], r["utility_after"]) for r in rows}

    def load_episode(self, episode_id: str) -> EpisodeTrace:
        """A committed episode as it was recorded, so its credit can be recomputed and audited."""
        with self.store._transaction() as conn:
            row = conn.execute(
                "SELECT episode_id, operator, level, policy, t_first, t_best, hot_version_seen, rounds, metadata "
                "FROM ks_episodes WHERE namespace_id = %s AND episode_id = %s", (self.info.id, episode_id),
            ).fetchone()
            if row is None:
                raise EpisodeError(f"namespace {self.name!r} has no episode {episode_id!r}")
            exposures = conn.execute(
                "SELECT item_id, round, tier, stage, relevance, score, adopted, rationale FROM ks_exposures "
                "WHERE namespace_id = %s AND episode_id = %s ORDER BY round, item_id", (self.info.id, episode_id),
            ).fetchall()
        return EpisodeTrace(
            **{**row, "rounds": tuple(RoundOutcome(**r) for r in row["rounds"])},
            exposures=tuple(Exposure(**e) for e in exposures),
        )

    # -- consolidation ----------------------------------------------------------------------------

    def consolidate(self, *, abstract_rule: RuleAbstractor | None = None, seed: int | None = None) -> ConsolidationResult:
        """UGC: settle the validation gate, abstract new rules, reselect hot memory under budget B.

        Serialised per namespace by a session advisory lock, so two curators never interleave.
        """
        self._writable("consolidate")
        budget = self.params.hot_budget_tokens
        if not self.policy.uses_hot_memory:
            info = self.info_now()
            return ConsolidationResult(hot_version=info.hot_version, hot=(), promoted=(), demoted=(), validated=0,
                                       abstracted=0, tokens_used=0, budget=budget)
        with self.store.pool.connection() as lock_conn:
            lock_conn.execute("SELECT pg_advisory_lock(%s, %s)", (_LOCK_CLASS, self.info.id))
            lock_conn.commit()
            try:
                competitors, unabstracted = self._settle_validation()
                rule_tokens = self._abstract_new_rules(unabstracted, abstract_rule or _keep_source_text)
                return self._select_hot(competitors, rule_tokens, seed)
            finally:
                lock_conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LOCK_CLASS, self.info.id))
                lock_conn.commit()

    def _settle_validation(self) -> tuple[dict[int, ItemStats], list[int]]:
        """Apply the gate to every candidate; returns the rules competing for hot memory and the
        validated items that still need a rule. The gate itself is ugc.is_validated; the SQL only
        narrows the scan to a superset of what can pass it."""
        with self.store._transaction() as conn:
            seq = conn.execute("SELECT episode_seq FROM ks_namespaces WHERE id = %s", (self.info.id,)).fetchone()
            rows = _fetch_stats(
                conn, sql.SQL("namespace_id = %(ns)s AND (state <> 'cold' OR (utility > 0 AND n_ado >= %(k)s))"),
                {"seq": seq["episode_seq"], "ns": self.info.id, "k": self.params.k_ado},
            )
            competitors: dict[int, ItemStats] = {}
            unabstracted: list[int] = []
            changed: list[tuple[int, str]] = []
            for stats, has_rule in rows:
                if stats.state != "hot":
                    settled = ugc.settle_cold_state(stats, self.params)
                    if settled != stats.state:
                        changed.append((stats.item_id, settled))
                    if settled == "cold":
                        continue
                if has_rule:
                    competitors[stats.item_id] = stats
                else:
                    unabstracted.append(stats.item_id)
            if changed:
                conn.execute(
                    "UPDATE ks_items AS t SET state = c.state, updated_at = now() "
                    "FROM unnest(%s::bigint[], %s::text[]) AS c(id, state) WHERE t.id = c.id",
                    ([i for i, _ in changed], [s for _, s in changed]),
                )
        return competitors, unabstracted

    def _abstract_new_rules(self, item_ids: list[int], abstract_rule: RuleAbstractor) -> dict[int, int]:
        """Rewrite newly validated items into rules; returns each new rule's token length."""
        if not item_ids:
            return {}
        with self.store._transaction() as conn:
            rows = conn.execute(
                sql.SQL("SELECT {} FROM ks_items WHERE id = ANY(%s) ORDER BY id").format(_ITEM_COLUMNS), (item_ids,),
            ).fetchall()
        # The model is called outside any transaction; the advisory lock keeps other curators out.
        rules = [(row["id"], abstract_rule(_to_item(row)).strip()) for row in rows]
        tokens = {i: self.store.token_counter(text) for i, text in rules if text}
        with self.store._transaction() as conn:
            conn.execute(
                "UPDATE ks_items AS t SET rule_text = r.text, rule_tokens = r.tokens, abstracted_at = now(), "
                "updated_at = now() FROM unnest(%s::bigint[], %s::text[], %s::int[]) AS r(id, text, tokens) "
                "WHERE t.id = r.id",
                ([i for i, t in rules if t], [t for _, t in rules if t], [tokens[i] for i, t in rules if t]),
            )
        return tokens

    def _select_hot(self, competitors: dict[int, ItemStats], new_rule_tokens: dict[int, int],
                    seed: int | None) -> ConsolidationResult:
        budget = self.params.hot_budget_tokens
        # Newly abstracted items compete with their rule's length; the rest with what was read.
        stats = [*competitors.values()]
        with self.store._transaction() as conn:
            ns = conn.execute(
                "SELECT episode_seq, hot_version FROM ks_namespaces WHERE id = %s FOR UPDATE", (self.info.id,)
            ).fetchone()
            seq = ns["episode_seq"]
            if new_rule_tokens:
                fresh = _fetch_stats(conn, sql.SQL("id = ANY(%(ids)s)"), {"seq": seq, "ids": list(new_rule_tokens)})
                stats += [s for s, _ in fresh]
            pool = [
                ugc.HotCandidate(
                    item_id=s.item_id, utility=s.utility, tokens=s.tokens,
                    access=s.access if s.state == "hot" else ugc.cold_access_estimate(s.n_ret_cold, s.eligible_episodes),
                )
                for s in stats
            ]
            if self.policy.consolidation == "random":
                selected = ugc.select_random(pool, budget, random.Random(seq if seed is None else seed))
            else:
                selected = ugc.select_hot(pool, budget)
            current = [s.item_id for s in stats if s.state == "hot"]
            plan = ugc.plan_consolidation(current, selected, {c.item_id: c.tokens for c in pool})
            version = ns["hot_version"]
            if plan.promoted or plan.demoted:
                version += 1
                self._apply_plan(conn, plan, {c.item_id: c for c in pool}, seq, version)
        return ConsolidationResult(hot_version=version, hot=plan.hot, promoted=plan.promoted, demoted=plan.demoted,
                                   validated=sum(1 for s in stats if s.state != "hot"),
                                   abstracted=len(new_rule_tokens), tokens_used=plan.tokens_used, budget=budget)

    def _apply_plan(self, conn: psycopg.Connection, plan: ugc.ConsolidationPlan,
                    pool: dict[int, ugc.HotCandidate], seq: int, version: int) -> None:
        promoted, demoted = list(plan.promoted), list(plan.demoted)
        conn.execute(
            "UPDATE ks_items AS t SET state = 'hot', access = p.access, promoted_at = now(), updated_at = now(), "
            "eligible_banked = t.eligible_banked + (%s - COALESCE(t.eligible_since, %s)), eligible_since = NULL "
            "FROM unnest(%s::bigint[], %s::float8[]) AS p(id, access) WHERE t.id = p.id",
            (seq, seq, promoted, [pool[i].access for i in promoted]),
        )
        conn.execute(
            "UPDATE ks_items SET state = 'validated', eligible_since = %s, demoted_at = now(), updated_at = now() "
            "WHERE id = ANY(%s)",
            (seq, demoted),
        )
        conn.execute(
            "UPDATE ks_item_vectors SET resident = item_id = ANY(%s) WHERE item_id = ANY(%s)",
            (promoted, promoted + demoted),
        )
        conn.execute(
            "INSERT INTO ks_hot_events (namespace_id, hot_version, item_id, event, priority) "
            "SELECT %s, %s, e.id, e.event, e.priority FROM unnest(%s::bigint[], %s::text[], %s::float8[]) "
            "AS e(id, event, priority)",
            (self.info.id, version, promoted + demoted,
             ["promoted"] * len(promoted) + ["demoted"] * len(demoted),
             [ugc.priority(pool[i].utility, pool[i].access, pool[i].tokens) for i in promoted + demoted]),
        )
        conn.execute("UPDATE ks_namespaces SET hot_version = %s WHERE id = %s", (version, self.info.id))

    # -- statistics -------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The memory's shape after an episode, for reports: counts by state, hot tokens and the kinds
        of hot items, and every item's utility."""
        with self.store._transaction() as conn:
            rows = conn.execute(
                "SELECT state, kind, utility, COALESCE(rule_tokens, tokens) AS tokens FROM ks_items "
                "WHERE namespace_id = %s ORDER BY id", (self.info.id,)).fetchall()
        by_state = dict.fromkeys(("cold", "validated", "hot"), 0)
        hot_kinds: dict[str, int] = {}
        for row in rows:
            by_state[row["state"]] += 1
            if row["state"] == "hot":
                hot_kinds[row["kind"]] = hot_kinds.get(row["kind"], 0) + 1
        return {"by_state": by_state, "hot_tokens": sum(r["tokens"] for r in rows if r["state"] == "hot"),
                "utilities": [r["utility"] for r in rows], "hot_kinds": hot_kinds}

    def stats(self) -> dict[str, Any]:
        """Counts by lifecycle state, hot-memory use, episodes and utility summary of this namespace."""
        with self.store._transaction() as conn:
            by_state = {r["state"]: r["n"] for r in conn.execute(
                "SELECT state, count(*) AS n FROM ks_items WHERE namespace_id = %s GROUP BY state", (self.info.id,))}
            summary = conn.execute(
                "SELECT count(*) AS items, avg(utility) AS mean_utility, "
                "coalesce(sum(COALESCE(rule_tokens, tokens)) FILTER (WHERE state = 'hot'), 0) AS hot_tokens, "
                "coalesce(sum(n_ado), 0) AS adoptions, coalesce(sum(n_ret), 0) AS exposures "
                "FROM ks_items WHERE namespace_id = %s", (self.info.id,)).fetchone()
            episodes = conn.execute(
                "SELECT count(*) AS n, count(*) FILTER (WHERE t_first IS NOT NULL) AS solved "
                "FROM ks_episodes WHERE namespace_id = %s", (self.info.id,)).fetchone()
        info = self.info_now()
        return {
            "namespace": self.name,
            "policy": self.policy.name,
            "read_only": self.read_only,
            "embedding_dim": info.embedding_dim,
            "embedding_model": info.embedding_model,
            "items": summary["items"],
            "by_state": {s: by_state.get(s, 0) for s in ("cold", "validated", "hot")},
            "hot_tokens": int(summary["hot_tokens"]),
            "hot_budget": self.params.hot_budget_tokens,
            "hot_version": info.hot_version,
            "episodes": episodes["n"],
            "solved_episodes": episodes["solved"],
            "mean_utility": float(summary["mean_utility"]) if summary["mean_utility"] is not None else None,
            "adoption_rate": (summary["adoptions"] / summary["exposures"]) if summary["exposures"] else None,
        }



# -- transfer: every row of a namespace, in a stable order, and back ------------------------------

_EXPORT_TABLES: tuple[tuple[str, str, str], ...] = (
    # (record type, table, order) — items first: the rest refers to them by their exported id
    ("item", "ks_items", "id"),
    ("episode", "ks_episodes", "seq, episode_id"),
    ("exposure", "ks_exposures", "episode_id, round, item_id"),
    ("credit", "ks_credits", "episode_id, item_id"),
    ("hot_event", "ks_hot_events", "hot_version, item_id, event"),
)
_ITEM_REFERENCES = {"exposure", "credit", "hot_event"}


def export_namespace(store: MemoryStore, name: str) -> Iterator[dict[str, Any]]:
    """Yield a namespace as plain records: its header, then items, episodes, exposures, credits, hot events."""
    info = store.namespace_info(name)
    if info is None:
        raise NamespaceError(f"namespace {name!r} does not exist")
    yield {"type": "namespace", "name": info.name, "embedding_dim": info.embedding_dim,
           "embedding_model": info.embedding_model, "episode_seq": info.episode_seq,
           "hot_version": info.hot_version}
    with store._transaction() as conn:
        for record_type, table, order in _EXPORT_TABLES:
            cursor = conn.cursor(name=f"export_{record_type}")  # server-side: big namespaces stream
            if record_type == "item":
                query = sql.SQL(
                    "SELECT i.*, v.embedding FROM ks_items i JOIN ks_item_vectors v ON v.item_id = i.id "
                    "WHERE i.namespace_id = %s ORDER BY i.id")
            else:
                query = sql.SQL("SELECT * FROM {} WHERE namespace_id = %s ORDER BY {}").format(
                    sql.Identifier(table), sql.SQL(order))
            cursor.execute(query, (info.id,))
            for row in cursor:
                row.pop("namespace_id")
                if record_type == "item":
                    row["embedding"] = [float(x) for x in row["embedding"].to_numpy()]
                    row["adopting_ops"] = sorted(row["adopting_ops"])
                yield {"type": record_type, **row}


def import_namespace(store: MemoryStore, name: str, records: Iterator[dict[str, Any]]) -> NamespaceInfo:
    """Create namespace `name` from exported records, all in one transaction.

    The first record must be the namespace header. Item ids are reassigned; references follow them.
    """
    header = next(records, None)
    if header is None or header.get("type") != "namespace":
        raise NamespaceError("an import must start with the namespace record")
    if store.namespace_info(name) is not None:
        raise NamespaceError(f"namespace {name!r} exists already: import into a new name or delete it first")
    info = store.create_namespace(name, embedding_dim=header["embedding_dim"],
                                  embedding_model=header["embedding_model"])
    try:
        with store._transaction() as conn:
            ids: dict[int, int] = {}
            for record in records:
                record_type = record.pop("type")
                table = next((t for r, t, _ in _EXPORT_TABLES if r == record_type), None)
                if table is None:
                    raise NamespaceError(f"unknown record type {record_type!r}")
                vector = None
                if record_type == "item":
                    old = record.pop("id")
                    new = conn.execute("SELECT nextval('ks_items_id_seq') AS id").fetchone()["id"]
                    ids[old] = new
                    vector = _vector(record.pop("embedding"), info.embedding_dim, f"item {old}")
                    record = {**record, "id": new}
                elif record_type in _ITEM_REFERENCES:
                    if record["item_id"] not in ids:
                        raise NamespaceError(f"{record_type} refers to item {record['item_id']}, which is not exported")
                    record = {**record, "item_id": ids[record["item_id"]]}
                for key in ("metadata", "rounds"):
                    if key in record and not isinstance(record[key], Jsonb):
                        record[key] = Jsonb(record[key])
                columns = ["namespace_id", *record]
                conn.execute(
                    sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        sql.Identifier(table),
                        sql.SQL(", ").join(map(sql.Identifier, columns)),
                        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
                    ),
                    [info.id, *record.values()],
                )
                if vector is not None:
                    conn.execute(
                        "INSERT INTO ks_item_vectors (item_id, namespace_id, resident, embedding) "
                        "VALUES (%s, %s, %s, %s)",
                        (record["id"], info.id, record["state"] == "hot", vector),
                    )
            conn.execute("UPDATE ks_namespaces SET episode_seq = %s, hot_version = %s WHERE id = %s",
                         (header["episode_seq"], header["hot_version"], info.id))
    except (psycopg.Error, KeyError, TypeError) as exc:
        store.delete_namespace(name)
        raise NamespaceError(f"import into {name!r} failed and was rolled back: {exc}") from exc
    except Exception:
        store.delete_namespace(name)
        raise
    result = store.namespace_info(name)
    assert result is not None
    return result

"""The memory's public API: `MemoryStore` (the database, its namespaces) and `Memory` (one namespace
seen through one policy). Both are thin: each method delegates to the module of its concern, which
takes what it needs as arguments and keeps its SQL in queries.py:

- schema.py (migrations), namespaces.py, item_rows.py (items), retrieval.py, episodes.py (the
  episode commit), consolidation.py (UGC), stats.py, transfer.py (export and import).

The store never calls a model: embeddings and rule abstraction arrive as objects and callables.
Every multi-statement change runs in one transaction, so a failure leaves memory as it was.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.errors import DatabaseError, ReadOnlyMemoryError
from kernelsage.memory_backend import (
    consolidation,
    episodes,
    item_rows,
    namespaces,
    retrieval,
    schema,
    stats,
    vector_index,
)
from kernelsage.memory_backend.candidates import CandidateCaches
from kernelsage.memory_backend.consolidation import RuleAbstractor
from kernelsage.memory_backend.database import (
    REFUSED_DATA,
    database_url,
    open_pool,
    refusal,
    run_transaction,
    transaction,
)
from kernelsage.memory_backend.items import (
    CommitResult,
    ConsolidationResult,
    MemoryItem,
    NamespaceInfo,
    NewItem,
    Retrieval,
)
from kernelsage.memory_backend.namespaces import MAX_DIM
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy, get_policy
from kernelsage.memory_backend.records import EpisodeTrace, Stage
from kernelsage.memory_backend.tokens import TokenCounter, approx_token_count
from kernelsage.memory_backend.transfer import export_namespace, import_namespace
from kernelsage.memory_backend.validation import MAX_EPISODE_ITEMS, check_count, check_new_items, check_trace

if TYPE_CHECKING:  # only annotations: a memory command must not load the model stack
    from langchain_core.embeddings import Embeddings

__all__ = ["MAX_DIM", "Memory", "MemoryStore", "RuleAbstractor", "export_namespace", "import_namespace"]

log = logging.getLogger(__name__)


class MemoryStore:
    """The memory database: namespaces over one connection pool, migrated at open."""

    def __init__(self, pool: ConnectionPool, *, params: SageParams | None = None,
                 token_counter: TokenCounter = approx_token_count, owns_pool: bool = False) -> None:
        self.pool = pool
        self.params = params or SageParams()
        self.token_counter = token_counter
        self._owns_pool = owns_pool
        self.index_builds = vector_index.IndexBuilds(pool)
        self.candidate_caches = CandidateCaches()  # consolidation reads what changed since its last run
        self.migrate()

    @classmethod
    def connect(cls, url: str | None = None, **kwargs: Any) -> MemoryStore:
        """Open the store at url (default: DATABASE_URL or the embedded server)."""
        return cls(open_pool(url or database_url()), owns_pool=True, **kwargs)

    def close(self) -> None:
        """Wait for an index build under way, then close the pool if the store opened it."""
        self.index_builds.close()
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transaction(self) -> AbstractContextManager[psycopg.Connection]:
        return transaction(self.pool)

    def migrate(self) -> list[int]:
        """Apply the migrations this database lacks, under a lock; returns the versions applied now.

        Re-run from the start when the server aborts it for a deadlock: its DDL takes exclusive locks table by
        table, which a reader of those tables (another process's index maintenance) can meet in the other order.
        """
        return run_transaction(self.pool, schema.migrate)

    def applied_migrations(self) -> list[int]:
        with self._transaction() as conn:
            return schema.applied_migrations(conn)

    def list_namespaces(self) -> list[NamespaceInfo]:
        with self._transaction() as conn:
            return namespaces.list_namespaces(conn)

    def namespace_info(self, name: str) -> NamespaceInfo | None:
        with self._transaction() as conn:
            return namespaces.namespace_info(conn, name)

    def create_namespace(self, name: str, *, embedding_dim: int, embedding_model: str) -> NamespaceInfo:
        """Create a namespace (idempotent when the dimension and model agree) and its vector index."""
        return run_transaction(self.pool, lambda conn: namespaces.create_namespace(
            conn, name, embedding_dim=embedding_dim, embedding_model=embedding_model))

    def open(
        self,
        name: str,
        *,
        embeddings: Embeddings | None = None,
        embedding_dim: int | None = None,
        policy: str | MemoryPolicy = "sage",
        read_only: bool = False,
        create: bool = True,
        params: SageParams | None = None,
        seed: Callable[[], Sequence[NewItem]] | None = None,
    ) -> Memory:
        """A handle on one namespace, created on first use unless read_only or create=False.

        `params` (default: the store's) are the hyperparameters this handle ranks, credits and consolidates
        with; each committed episode records them. `seed` gives the items a namespace starts with: stored in
        the transaction that creates it, so of several workers opening a fresh namespace at once exactly
        one seeds it, and nobody sees it without them.
        """
        info = namespaces.resolve(self.pool, name, embeddings=embeddings, embedding_dim=embedding_dim,
                                  create=create and not read_only, seed=seed, token_counter=self.token_counter)
        if not read_only:  # a build an earlier process left unfinished is cleaned up and done again
            self.index_builds.request(info)
        chosen = policy if isinstance(policy, MemoryPolicy) else get_policy(policy)
        return Memory(self, info, embeddings=embeddings, policy=chosen, read_only=read_only,
                      params=params or self.params)

    def delete_namespace(self, name: str) -> bool:
        """Delete a namespace with everything in it; False when there was none of that name."""
        return bool(self.delete_namespaces([name]))

    def delete_namespaces(self, names: Sequence[str]) -> list[str]:
        """Delete several namespaces in one transaction (all or none); returns those that existed. Their
        vector indexes are dropped in the background, without locking the table other namespaces use."""
        deleted = run_transaction(self.pool, lambda conn: [n for n in names if namespaces.delete_namespace(conn, n)])
        if deleted:
            self.index_builds.drop_orphans()
        return deleted


class Memory:
    """One namespace seen through one memory policy; read-only handles refuse every update."""

    def __init__(self, store: MemoryStore, info: NamespaceInfo, *, embeddings: Embeddings | None,
                 policy: MemoryPolicy, read_only: bool, params: SageParams | None = None) -> None:
        self.store = store
        self.info = info
        self.embeddings = embeddings
        self.policy = policy
        self.read_only = read_only
        self.params = params or store.params

    @property
    def name(self) -> str:
        return self.info.name

    def _writable(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyMemoryError(
                f"cannot {action}: namespace {self.name!r} is open read-only (a frozen memory); "
                "open it without read_only to change it"
            )

    def _embed(self, items: Sequence[NewItem]) -> list[np.ndarray]:
        return item_rows.embed_items(items, self.embeddings, self.info.embedding_dim) if items else []

    # -- items ------------------------------------------------------------------------------------

    def add_items(self, items: Sequence[NewItem], *, unless_kind_present: str | None = None) -> list[int]:
        """Store new cold items (embedding missing ones) in one transaction; returns their ids.

        With `unless_kind_present`, nothing is stored (and [] returned) when the namespace already holds an
        item of that kind, checked under the namespace's lock: seeding a pack twice at once stores it once.
        """
        self._writable("add items")
        check_new_items(items)
        if not items:
            return []
        vectors = self._embed(items)

        def work(conn: psycopg.Connection) -> list[int]:
            seq = namespaces.counters(conn, self.info, for_update=True)["episode_seq"]
            if unless_kind_present and item_rows.count_items(conn, self.info.id, unless_kind_present):
                return []
            return item_rows.insert_items(conn, self.info.id, items, vectors, seq, self.store.token_counter)

        ids = run_transaction(self.store.pool, work)
        if ids:
            self.store.index_builds.request(self.info, added=len(ids))  # grows the index's lists with the namespace
        return ids

    def get_item(self, item_id: int) -> MemoryItem:
        with self.store._transaction() as conn:
            return item_rows.get_item(conn, self.info, item_id)

    def count_items(self, *, kind: str | None = None) -> int:
        """How many items the namespace holds (of one kind: experience, knowledge, rule)."""
        with self.store._transaction() as conn:
            return item_rows.count_items(conn, self.info.id, kind)

    def list_items(self, *, state: str | None = None, limit: int = 50) -> list[MemoryItem]:
        """Items by descending utility (then id), optionally of one lifecycle state."""
        limit = check_count(limit, "the listing's limit", minimum=0)
        with self.store._transaction() as conn:
            return item_rows.list_items(conn, self.info.id, state, limit)

    def hot_rules(self) -> list[MemoryItem]:
        """The resident hot rules (empty for policies without hot memory)."""
        with self.store._transaction() as conn:
            return retrieval.hot_rules(conn, self.info.id, self.policy)

    # -- retrieval --------------------------------------------------------------------------------

    def relevance_pool(self, query: Sequence[float] | np.ndarray, *, size: int) -> list[tuple[MemoryItem, float]]:
        """The `size` retrievable items nearest to the query by cosine similarity, nearest first."""
        size = check_count(size, "the pool size")
        with self.store._transaction() as conn:
            return retrieval.relevance_pool(conn, self.info, query, size, probes=self.params.probes,
                                            exclude_resident=self.policy.uses_hot_memory)

    def retrieve(
        self,
        query: str | Sequence[float] | np.ndarray,
        *,
        k: int | None = None,
        stage: Stage = "draft",
        rng: random.Random | None = None,
        episode_id: str | None = None,
        round: int | None = None,
    ) -> Retrieval:
        """Cold items for a need (relevance pool, reranked late by the policy) plus the resident hot rules,
        read from one snapshot.

        An agent passes the `episode_id` and the `round` the items are shown in (the round of their
        `Exposure` records): the store records what it showed, and that episode's commit must match it.
        """
        k = self.params.top_k if k is None else check_count(k, "k, the number of cold items to return")
        episode = None
        if episode_id is not None and not self.read_only:
            episode = (episode_id, 0 if round is None else round)
        return retrieval.retrieve(self.store.pool, self.info, self.policy, self.params, self.embeddings, query,
                                  k=k, stage=stage, rng=rng or random.Random(),
                                  episode=episode)

    def show(self, episode_id: str, round: int, item_ids: Sequence[int]) -> Retrieval:
        """Record that a host showed these items (chosen by itself) in an episode round, with the resident
        rules, as a retrieval would; their tiers are what the store holds now. The commit is checked
        against it like against a retrieval."""
        self._writable("record shown items")
        return retrieval.show(self.store.pool, self.info, self.policy, (episode_id, round), list(item_ids))

    def info_now(self) -> NamespaceInfo:
        with self.store._transaction() as conn:
            return namespaces.current_info(conn, self.name)

    # -- the episode commit -----------------------------------------------------------------------

    def commit_episode(self, episode: EpisodeTrace, new_items: Sequence[NewItem] = ()) -> CommitResult:
        """Record an episode, apply its credit and store the experiences it produced, in one
        transaction; idempotent per episode id (a repeat changes nothing and says so).

        An experience the database refuses (a value or row over one of its limits) is left out, with the
        reason in the result's `unstored`; the episode and its credits are recorded all the same."""
        self._writable("commit an episode")
        check_trace(episode)
        check_new_items(new_items, MAX_EPISODE_ITEMS)
        vectors = self._embed(new_items)

        def commit(isolate_items: bool) -> CommitResult:
            return run_transaction(self.store.pool, lambda conn: episodes.commit_episode(
                conn, self.info, self.policy, self.params, episode, new_items, vectors, self.store.token_counter,
                isolate_items=isolate_items), pipeline=not isolate_items)

        try:
            result = commit(isolate_items=False)
        except REFUSED_DATA:
            # What it refused is most likely in an experience: the episode, its attempts and the credits of
            # what it showed must not be lost with it. Again, each experience in a savepoint of its own.
            try:
                if not new_items:
                    raise
                result = commit(isolate_items=True)
            except REFUSED_DATA as refused:  # the episode itself
                raise DatabaseError(f"the database refused episode {episode.episode_id!r} ({refusal(refused)}): "
                                    "nothing was recorded") from refused
            log.warning("episode %s recorded; %d of its experiences were refused by the database: %s",
                        episode.episode_id, len(result.unstored), "; ".join(result.unstored))
        if result.new_item_ids and result.applied:
            self.store.index_builds.request(self.info, added=len(result.new_item_ids))
        return result

    def episode_credits(self, episode_id: str) -> dict[int, tuple[float, float, float]]:
        """Stored (credit, utility before, utility after) per item of one committed episode, for audits."""
        with self.store._transaction() as conn:
            return episodes.episode_credits(conn, self.info, episode_id)

    def load_episode(self, episode_id: str) -> EpisodeTrace:
        """A committed episode as it was recorded, so its credit can be recomputed and audited."""
        with self.store._transaction() as conn:
            return episodes.load_episode(conn, self.info, episode_id)

    # -- consolidation ----------------------------------------------------------------------------

    def consolidate(self, *, abstract_rule: RuleAbstractor | None = None, seed: int | None = None) -> ConsolidationResult:
        """UGC: settle the validation gate, abstract new rules, reselect hot memory under budget B.

        Serialised per namespace by a session advisory lock, so two curators never interleave.
        """
        self._writable("consolidate")
        if not self.policy.uses_hot_memory:
            return ConsolidationResult(hot_version=self.info_now().hot_version, hot=(), promoted=(), demoted=(),
                                       validated=0, abstracted=0, tokens_used=0, budget=self.params.hot_budget_tokens)
        return consolidation.consolidate(self.store.pool, self.info, self.policy, self.params,
                                         self.store.token_counter, seed=seed, caches=self.store.candidate_caches,
                                         abstract_rule=abstract_rule or consolidation.keep_source_text)

    # -- statistics -------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The memory's shape after an episode, for reports: counts by state, hot tokens and the kinds
        of hot items, and every item's utility."""
        with self.store._transaction() as conn:
            return stats.snapshot(conn, self.info.id)

    def stats(self) -> dict[str, Any]:
        """Counts by lifecycle state, hot-memory use, episodes and utility summary of this namespace."""
        with self.store._transaction() as conn:
            return stats.summary(conn, namespaces.current_info(conn, self.name), policy=self.policy.name,
                                 read_only=self.read_only, params=self.params)

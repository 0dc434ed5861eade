"""Utility-gated consolidation (UGC) against the database: settle the validation gate, abstract new
rules, reselect hot memory under its token budget. The decisions are ugc.py's; this module reads
what they need and writes what they decide.

Serialised per namespace by a session advisory lock that spans the whole of it, including the
rule abstraction (a model call), which runs outside any transaction.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.memory_backend import candidates, item_rows, ugc
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.candidates import CandidateCache, CandidateCaches
from kernelsage.memory_backend.database import autocommit, run_transaction
from kernelsage.memory_backend.items import ConsolidationResult, MemoryItem, NamespaceInfo
from kernelsage.memory_backend.namespaces import counters
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy
from kernelsage.memory_backend.tokens import TokenCounter

RuleAbstractor = Callable[[MemoryItem], str]


def keep_source_text(item: MemoryItem) -> str:
    """The default abstraction: the source text itself, until a model is passed in to rewrite it."""
    return item.text


def consolidate(pool: ConnectionPool, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
                count_tokens: TokenCounter, *, abstract_rule: RuleAbstractor, seed: int | None,
                caches: CandidateCaches | None = None) -> ConsolidationResult:
    """UGC for one namespace whose policy keeps a hot memory, under the namespace's advisory lock.

    Each pass is one transaction that first locks the namespace row (the lock order of every item writer,
    so it can neither deadlock with a commit nor interleave with one) and is retried whole if the server
    aborts it. When newly validated items need a rule, the model is called between two passes, outside
    any transaction; the second pass settles the gate again on what commits changed meanwhile.

    With `caches` (the store's), the candidates are read incrementally (candidates.py); each pass's cache
    is kept only once its transaction has committed.
    """
    caches = caches or CandidateCaches()

    def run(rules: dict[int, tuple[str, int]]) -> ConsolidationResult | list[int]:
        cached = caches.get(info.id)
        caches.put(info.id, None)  # until this pass has committed: a rolled-back pass leaves no cache behind
        outcome, cache = run_transaction(pool, lambda conn: _pass(conn, info, policy, params, rules, seed, cached),
                                         pipeline=True)  # its writes travel with the next read or the COMMIT
        caches.put(info.id, cache)
        return outcome

    with pool.connection() as lock_conn, autocommit(lock_conn):  # lock and unlock: one statement each
        lock_conn.execute(q.CONSOLIDATION_LOCK, (q.LOCK_CLASS, info.id))
        try:
            first = run({})
            if isinstance(first, ConsolidationResult):
                return first
            rules = _abstract_new_rules(pool, info, first, abstract_rule, count_tokens)
            second = run(rules)
            assert isinstance(second, ConsolidationResult)
            return second
        finally:
            lock_conn.execute(q.CONSOLIDATION_UNLOCK, (q.LOCK_CLASS, info.id))


def _pass(conn: psycopg.Connection, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
          rules: dict[int, tuple[str, int]], seed: int | None,
          cached: CandidateCache | None) -> tuple[ConsolidationResult | list[int], CandidateCache]:
    """Settle the gate and reselect hot memory; without `rules`, return the validated items that still
    need one instead (if any). Given rules are written for items still validated; items validated since
    they were written compete at the next consolidation. Returns the outcome and the candidates' cache
    (the rows this pass wrote marked for the next read)."""
    ns = counters(conn, info, for_update=True)
    cache = candidates.read(conn, info.id, ns["episode_seq"], params.k_ado, cached)
    items = cache.at(ns["episode_seq"])
    kept, settled = _settle_validation(conn, items, params)
    unabstracted = items.ids[kept & ~items.has_rule].tolist()
    if unabstracted and not rules:
        return unabstracted, _written(conn, info, cache, settled)
    written = {i: rules[i] for i in unabstracted if i in rules}
    tokens, has_rule = items.tokens.copy(), items.has_rule.copy()
    if written:
        ids = sorted(written)
        conn.execute(q.SET_RULES, (ids, [written[i][0] for i in ids], [written[i][1] for i in ids]))
        for k in np.flatnonzero(np.isin(items.ids, ids)):
            tokens[k], has_rule[k] = written[int(items.ids[k])][1], True
    rivals = _competitors(items, kept & has_rule, tokens)
    result = _select_hot(conn, info, policy, params, ns, rivals, len(written), seed)
    if result.promoted or result.demoted:  # the swap, applied to the cache as PROMOTE and DEMOTE wrote it
        access = rivals.access[np.searchsorted(rivals.ids, result.promoted)].tolist()
        cache = cache.moved(ns["episode_seq"], list(result.promoted), access, list(result.demoted))
    return result, _written(conn, info, cache, [*settled, *written], moved=bool(result.promoted or result.demoted))


def _written(conn: psycopg.Connection, info: NamespaceInfo, cache: CandidateCache, ids: list[int], *,
             moved: bool = False) -> CandidateCache:
    """The cache after this pass: when it wrote rows, the epoch is bumped; the rows in `ids` are read again next
    time (those it only promoted or demoted, `moved`, are already up to date in the cache)."""
    return cache.written(candidates.bump_epoch(conn, info.id), ids) if ids or moved else cache


def _settle_validation(conn: psycopg.Connection, items: item_rows.GateCandidates,
                       params: SageParams) -> tuple[np.ndarray, list[int]]:
    """Apply the gate to every non-resident candidate and write the states that change; returns which
    candidates stay in the running for hot memory (resident, or validated now) and the items changed."""
    validated = ~items.hot & ugc.passes_gate(items.utility, items.n_ado, items.distinct_ops, params)
    changed = ~items.hot & (validated != items.validated)
    if changed.any():
        conn.execute(q.SET_STATES, (items.ids[changed].tolist(),
                                    np.where(validated[changed], "validated", "cold").tolist()))
    return items.hot | validated, items.ids[changed].tolist()


class _Competitors(NamedTuple):
    """The rules competing for hot memory, one numpy column each, with access as `ugc` defines it:
    the moving average of a resident rule, the cold estimate of any other."""

    ids: np.ndarray
    utility: np.ndarray
    access: np.ndarray
    tokens: np.ndarray
    resident: np.ndarray


def _competitors(items: item_rows.GateCandidates, kept: np.ndarray, tokens: np.ndarray) -> _Competitors:
    resident = items.hot[kept]
    estimate = ugc.cold_access_estimates(items.n_ret_cold[kept], items.eligible_episodes[kept])
    return _Competitors(ids=items.ids[kept], utility=items.utility[kept],
                        access=np.where(resident, items.access[kept], estimate), tokens=tokens[kept],
                        resident=resident)


def _abstract_new_rules(pool: ConnectionPool, info: NamespaceInfo, item_ids: list[int],
                        abstract_rule: RuleAbstractor, count_tokens: TokenCounter) -> dict[int, tuple[str, int]]:
    """Rewrite newly validated items into rules (text, token length); the caller writes them."""
    items = run_transaction(pool, lambda conn: item_rows.items_in_namespace(conn, info.id, item_ids))
    # The model is called outside any transaction; the advisory lock keeps other curators out.
    rules = {item.id: abstract_rule(item).strip() for item in items}
    return {i: (text, count_tokens(text)) for i, text in rules.items() if text}


def _select_hot(conn: psycopg.Connection, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
                ns: dict[str, int], rivals: _Competitors, abstracted: int, seed: int | None) -> ConsolidationResult:
    budget = params.hot_budget_tokens
    seq = ns["episode_seq"]
    position = dict(zip(rivals.ids.tolist(), range(len(rivals.ids)), strict=True))

    def candidate(item_id: int) -> ugc.HotCandidate:
        k = position[item_id]
        return ugc.HotCandidate(item_id, float(rivals.utility[k]), float(rivals.access[k]), int(rivals.tokens[k]))

    if policy.consolidation == "random":
        selected = ugc.select_random([candidate(i) for i in position], budget,
                                     random.Random(seq if seed is None else seed))
    else:
        selected = ugc.select_hot_columns(rivals.ids, rivals.utility, rivals.access, rivals.tokens, budget)
    plan = ugc.plan_consolidation(rivals.ids[rivals.resident].tolist(), selected,
                                  {i: int(rivals.tokens[position[i]]) for i in selected})
    version = ns["hot_version"]
    if plan.promoted or plan.demoted:
        version += 1
        _apply_plan(conn, info.id, plan, rivals, seq, version)
    return ConsolidationResult(hot_version=version, hot=plan.hot, promoted=plan.promoted, demoted=plan.demoted,
                               validated=int((~rivals.resident).sum()), abstracted=abstracted,
                               tokens_used=plan.tokens_used, budget=budget)


def _apply_plan(conn: psycopg.Connection, namespace_id: int, plan: ugc.ConsolidationPlan, rivals: _Competitors,
                seq: int, version: int) -> None:
    """Write the swap: states (PROMOTE, DEMOTE: set-based, by primary key) and one hot event per moved rule,
    its priority computed over the columns as `ugc.priority` computes it."""
    promoted, demoted = list(plan.promoted), list(plan.demoted)
    up, down = np.searchsorted(rivals.ids, promoted), np.searchsorted(rivals.ids, demoted)  # ids are sorted
    moved = np.concatenate([up, down]).astype(np.int64)
    conn.execute(q.PROMOTE, {"seq": seq, "ids": promoted, "access": rivals.access[up].tolist()})
    conn.execute(q.DEMOTE, (seq, demoted))
    priorities = ugc.priority_columns(rivals.utility[moved], rivals.access[moved], rivals.tokens[moved])
    conn.execute(q.INSERT_HOT_EVENTS, (namespace_id, version, promoted + demoted,
                                       ["promoted"] * len(promoted) + ["demoted"] * len(demoted), priorities.tolist()))
    conn.execute(q.SET_HOT_VERSION, (version, namespace_id))

"""Utility-gated consolidation (UGC) against the database: settle the validation gate, abstract new
rules, reselect hot memory under its token budget. The decisions are ugc.py's; this module reads
what they need and writes what they decide.

Serialised per namespace by a session advisory lock that spans the whole of it, including the
rule abstraction (a model call), which runs outside any transaction.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.memory_backend import item_rows, ugc
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import run_transaction
from kernelsage.memory_backend.items import ConsolidationResult, MemoryItem, NamespaceInfo
from kernelsage.memory_backend.namespaces import counters
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy
from kernelsage.memory_backend.records import ItemStats
from kernelsage.memory_backend.tokens import TokenCounter

RuleAbstractor = Callable[[MemoryItem], str]


def keep_source_text(item: MemoryItem) -> str:
    """The default abstraction: the source text itself, until a model is passed in to rewrite it."""
    return item.text


def consolidate(pool: ConnectionPool, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
                count_tokens: TokenCounter, *, abstract_rule: RuleAbstractor, seed: int | None) -> ConsolidationResult:
    """UGC for one namespace whose policy keeps a hot memory, under the namespace's advisory lock.

    Each pass is one transaction that first locks the namespace row (the lock order of every item writer,
    so it can neither deadlock with a commit nor interleave with one) and is retried whole if the server
    aborts it. When newly validated items need a rule, the model is called between two passes, outside
    any transaction; the second pass settles the gate again on what commits changed meanwhile.
    """
    with pool.connection() as lock_conn:
        lock_conn.execute(q.CONSOLIDATION_LOCK, (q.LOCK_CLASS, info.id))
        lock_conn.commit()
        try:
            first = run_transaction(pool, lambda conn: _pass(conn, info, policy, params, {}, seed))
            if isinstance(first, ConsolidationResult):
                return first
            rules = _abstract_new_rules(pool, info, first, abstract_rule, count_tokens)
            second = run_transaction(pool, lambda conn: _pass(conn, info, policy, params, rules, seed))
            assert isinstance(second, ConsolidationResult)
            return second
        finally:
            lock_conn.execute(q.CONSOLIDATION_UNLOCK, (q.LOCK_CLASS, info.id))
            lock_conn.commit()


def _pass(conn: psycopg.Connection, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
          rules: dict[int, tuple[str, int]], seed: int | None) -> ConsolidationResult | list[int]:
    """Settle the gate and reselect hot memory; without `rules`, return the validated items that still
    need one instead (if any). Given rules are written for items still validated; items validated since
    they were written compete at the next consolidation."""
    ns = counters(conn, info, for_update=True)
    rows = item_rows.fetch_stats(conn, q.STATS_OF_GATE_CANDIDATES,
                                 {"seq": ns["episode_seq"], "ns": info.id, "k": params.k_ado})
    competitors, unabstracted = _settle_validation(conn, rows, params)
    if unabstracted and not rules:
        return unabstracted
    written = {i: rules[i] for i in unabstracted if i in rules}
    if written:
        ids = sorted(written)
        conn.execute(q.SET_RULES, (ids, [written[i][0] for i in ids], [written[i][1] for i in ids]))
        fresh = {s.item_id: s for s, _ in rows if s.item_id in written}
        competitors.update({i: fresh[i]._replace(tokens=written[i][1]) for i in ids})
    return _select_hot(conn, info, policy, params, ns, competitors, len(written), seed)


def _settle_validation(conn: psycopg.Connection, rows: list[tuple[ItemStats, bool]],
                       params: SageParams) -> tuple[dict[int, ItemStats], list[int]]:
    """Apply the gate to every candidate; returns the rules competing for hot memory and the
    validated items that still need a rule. The gate itself is ugc.is_validated; the SQL only
    narrows the scan to a superset of what can pass it."""
    competitors: dict[int, ItemStats] = {}
    unabstracted: list[int] = []
    changed: list[tuple[int, str]] = []
    for stats, has_rule in rows:
        if stats.state != "hot":
            settled = ugc.settle_cold_state(stats, params)
            if settled != stats.state:
                changed.append((stats.item_id, settled))
                stats = stats._replace(state=settled)
            if settled == "cold":
                continue
        if has_rule:
            competitors[stats.item_id] = stats
        else:
            unabstracted.append(stats.item_id)
    if changed:
        conn.execute(q.SET_STATES, ([i for i, _ in changed], [s for _, s in changed]))
    return competitors, unabstracted


def _abstract_new_rules(pool: ConnectionPool, info: NamespaceInfo, item_ids: list[int],
                        abstract_rule: RuleAbstractor, count_tokens: TokenCounter) -> dict[int, tuple[str, int]]:
    """Rewrite newly validated items into rules (text, token length); the caller writes them."""
    items = run_transaction(pool, lambda conn: item_rows.items_in_namespace(conn, info.id, item_ids))
    # The model is called outside any transaction; the advisory lock keeps other curators out.
    rules = {item.id: abstract_rule(item).strip() for item in items}
    return {i: (text, count_tokens(text)) for i, text in rules.items() if text}


def _select_hot(conn: psycopg.Connection, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
                ns: dict[str, int], competitors: dict[int, ItemStats], abstracted: int,
                seed: int | None) -> ConsolidationResult:
    budget = params.hot_budget_tokens
    stats = [*competitors.values()]
    seq = ns["episode_seq"]
    if policy.consolidation == "random":
        pool = [_candidate(s) for s in stats]
        selected = ugc.select_random(pool, budget, random.Random(seq if seed is None else seed))
    else:
        selected = ugc.select_hot_columns(*_columns(stats), budget)
    current = [s.item_id for s in stats if s.state == "hot"]
    plan = ugc.plan_consolidation(current, selected, {s.item_id: s.tokens for s in stats})
    version = ns["hot_version"]
    if plan.promoted or plan.demoted:
        version += 1
        moved = set(plan.promoted + plan.demoted)
        _apply_plan(conn, info.id, plan, {s.item_id: _candidate(s) for s in stats if s.item_id in moved}, seq,
                    version)
    return ConsolidationResult(hot_version=version, hot=plan.hot, promoted=plan.promoted, demoted=plan.demoted,
                               validated=sum(1 for s in stats if s.state != "hot"),
                               abstracted=abstracted, tokens_used=plan.tokens_used, budget=budget)


def _candidate(stats: ItemStats) -> ugc.HotCandidate:
    """An item as a competitor for hot memory: its access estimate depends on whether it is resident."""
    access = stats.access if stats.state == "hot" else ugc.cold_access_estimate(stats.n_ret_cold,
                                                                                 stats.eligible_episodes)
    return ugc.HotCandidate(item_id=stats.item_id, utility=stats.utility, access=access, tokens=stats.tokens)


def _columns(stats: list[ItemStats]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ids, utilities, access estimates and token lengths of the competitors, as `_candidate` computes
    them, one numpy column each."""
    count = len(stats)
    ids = np.fromiter((s.item_id for s in stats), np.int64, count)
    utility = np.fromiter((s.utility for s in stats), np.float64, count)
    tokens = np.fromiter((s.tokens for s in stats), np.int64, count)
    resident = np.fromiter((s.state == "hot" for s in stats), np.bool_, count)
    access = np.fromiter((s.access for s in stats), np.float64, count)
    estimate = ugc.cold_access_estimates(np.fromiter((s.n_ret_cold for s in stats), np.float64, count),
                                         np.fromiter((s.eligible_episodes for s in stats), np.float64, count))
    return ids, utility, np.where(resident, access, estimate), tokens


def _apply_plan(conn: psycopg.Connection, namespace_id: int, plan: ugc.ConsolidationPlan,
                candidates: dict[int, ugc.HotCandidate], seq: int, version: int) -> None:
    promoted, demoted = list(plan.promoted), list(plan.demoted)
    conn.execute(q.PROMOTE, (seq, seq, promoted, [candidates[i].access for i in promoted]))
    conn.execute(q.DEMOTE, (seq, demoted))
    conn.execute(q.SET_RESIDENT, (promoted, promoted + demoted))
    moved = [candidates[i] for i in promoted + demoted]
    conn.execute(q.INSERT_HOT_EVENTS, (
        namespace_id, version, promoted + demoted, ["promoted"] * len(promoted) + ["demoted"] * len(demoted),
        [ugc.priority(c.utility, c.access, c.tokens) for c in moved],
    ))
    conn.execute(q.SET_HOT_VERSION, (version, namespace_id))

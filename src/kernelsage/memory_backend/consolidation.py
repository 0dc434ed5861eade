"""Utility-gated consolidation (UGC) against the database: settle the validation gate, abstract new
rules, reselect hot memory under its token budget. The decisions are ugc.py's; this module reads
what they need and writes what they decide.

Serialised per namespace by a session advisory lock that spans the whole of it, including the
rule abstraction (a model call), which runs outside any transaction.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import psycopg
from psycopg_pool import ConnectionPool

from kernelsage.memory_backend import item_rows, ugc
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import transaction
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
    """UGC for one namespace whose policy keeps a hot memory, under the namespace's advisory lock."""
    with pool.connection() as lock_conn:
        lock_conn.execute(q.CONSOLIDATION_LOCK, (q.LOCK_CLASS, info.id))
        lock_conn.commit()
        try:
            with transaction(pool) as conn:
                competitors, unabstracted = _settle_validation(conn, info, params)
            rule_tokens = _abstract_new_rules(pool, unabstracted, abstract_rule, count_tokens)
            with transaction(pool) as conn:
                return _select_hot(conn, info, policy, params, competitors, rule_tokens, seed)
        finally:
            lock_conn.execute(q.CONSOLIDATION_UNLOCK, (q.LOCK_CLASS, info.id))
            lock_conn.commit()


def _settle_validation(conn: psycopg.Connection, info: NamespaceInfo,
                       params: SageParams) -> tuple[dict[int, ItemStats], list[int]]:
    """Apply the gate to every candidate; returns the rules competing for hot memory and the
    validated items that still need a rule. The gate itself is ugc.is_validated; the SQL only
    narrows the scan to a superset of what can pass it."""
    seq = counters(conn, info)["episode_seq"]
    rows = item_rows.fetch_stats(conn, q.STATS_OF_GATE_CANDIDATES, {"seq": seq, "ns": info.id, "k": params.k_ado})
    competitors: dict[int, ItemStats] = {}
    unabstracted: list[int] = []
    changed: list[tuple[int, str]] = []
    for stats, has_rule in rows:
        if stats.state != "hot":
            settled = ugc.settle_cold_state(stats, params)
            if settled != stats.state:
                changed.append((stats.item_id, settled))
            if settled == "cold":
                continue
        if has_rule:
            competitors[stats.item_id] = stats
        else:
            unabstracted.append(stats.item_id)
    if changed:
        conn.execute(q.SET_STATES, ([i for i, _ in changed], [s for _, s in changed]))
    return competitors, unabstracted


def _abstract_new_rules(pool: ConnectionPool, item_ids: list[int], abstract_rule: RuleAbstractor,
                        count_tokens: TokenCounter) -> dict[int, int]:
    """Rewrite newly validated items into rules; returns each new rule's token length."""
    if not item_ids:
        return {}
    with transaction(pool) as conn:
        items = item_rows.items_by_ids(conn, item_ids)
    # The model is called outside any transaction; the advisory lock keeps other curators out.
    rules = [(item.id, abstract_rule(item).strip()) for item in items]
    tokens = {i: count_tokens(text) for i, text in rules if text}
    with transaction(pool) as conn:
        conn.execute(q.SET_RULES, ([i for i, t in rules if t], [t for _, t in rules if t],
                                   [tokens[i] for i, t in rules if t]))
    return tokens


def _select_hot(conn: psycopg.Connection, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
                competitors: dict[int, ItemStats], new_rule_tokens: dict[int, int],
                seed: int | None) -> ConsolidationResult:
    budget = params.hot_budget_tokens
    # Newly abstracted items compete with their rule's length; the rest with what was read.
    stats = [*competitors.values()]
    ns = counters(conn, info, for_update=True)
    seq = ns["episode_seq"]
    if new_rule_tokens:
        fresh = item_rows.fetch_stats(conn, q.STATS_OF_IDS, {"seq": seq, "ids": list(new_rule_tokens)})
        stats += [s for s, _ in fresh]
    candidates = [
        ugc.HotCandidate(
            item_id=s.item_id, utility=s.utility, tokens=s.tokens,
            access=s.access if s.state == "hot" else ugc.cold_access_estimate(s.n_ret_cold, s.eligible_episodes),
        )
        for s in stats
    ]
    if policy.consolidation == "random":
        selected = ugc.select_random(candidates, budget, random.Random(seq if seed is None else seed))
    else:
        selected = ugc.select_hot(candidates, budget)
    current = [s.item_id for s in stats if s.state == "hot"]
    plan = ugc.plan_consolidation(current, selected, {c.item_id: c.tokens for c in candidates})
    version = ns["hot_version"]
    if plan.promoted or plan.demoted:
        version += 1
        _apply_plan(conn, info.id, plan, {c.item_id: c for c in candidates}, seq, version)
    return ConsolidationResult(hot_version=version, hot=plan.hot, promoted=plan.promoted, demoted=plan.demoted,
                               validated=sum(1 for s in stats if s.state != "hot"),
                               abstracted=len(new_rule_tokens), tokens_used=plan.tokens_used, budget=budget)


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

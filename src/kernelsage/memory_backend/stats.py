"""What a namespace looks like now: counts by lifecycle state, hot-memory use, episodes, utilities."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import NamespaceInfo, provenance_of
from kernelsage.memory_backend.params import SageParams

STATES = ("cold", "validated", "hot")


def snapshot(conn: psycopg.Connection, namespace_id: int) -> dict[str, Any]:
    """The memory's shape after an episode, for reports: counts by state, hot tokens and the kinds
    of hot items, and every item's utility."""
    rows = conn.execute(q.SNAPSHOT, (namespace_id,)).fetchall()
    by_state = dict.fromkeys(STATES, 0)
    hot_kinds: dict[str, int] = {}
    for row in rows:
        by_state[row["state"]] += 1
        if row["state"] == "hot":
            hot_kinds[row["kind"]] = hot_kinds.get(row["kind"], 0) + 1
    return {"by_state": by_state, "hot_tokens": sum(r["tokens"] for r in rows if r["state"] == "hot"),
            "utilities": [r["utility"] for r in rows], "hot_kinds": hot_kinds}


def summary(conn: psycopg.Connection, info: NamespaceInfo, *, policy: str, read_only: bool,
            params: SageParams) -> dict[str, Any]:
    """Counts by lifecycle state, hot-memory use, episodes and utility summary of a namespace; `info`
    should be read in the same transaction, so its hot-memory version matches the counts."""
    by_state = {r["state"]: r["n"] for r in conn.execute(q.COUNT_BY_STATE, (info.id,))}
    by_provenance: dict[str, int] = {}
    for row in conn.execute(q.COUNT_BY_PROVENANCE, (info.id,)):
        origin = provenance_of(row["declared"], row["kind"], row["from_episode"])
        by_provenance[origin] = by_provenance.get(origin, 0) + row["n"]
    items = conn.execute(q.ITEM_SUMMARY, (info.id,)).fetchone()
    episodes = conn.execute(q.EPISODE_SUMMARY, (info.id,)).fetchone()
    last = conn.execute(q.LAST_EPISODE_PARAMS, (info.id,)).fetchone()
    return {
        "namespace": info.name,
        "policy": policy,
        "read_only": read_only,
        "embedding_dim": info.embedding_dim,
        "embedding_model": info.embedding_model,
        "items": items["items"],
        "by_state": {s: by_state.get(s, 0) for s in STATES},
        "by_provenance": dict(sorted(by_provenance.items())),
        "hot_tokens": int(items["hot_tokens"]),
        "hot_budget": params.hot_budget_tokens,
        "hot_version": info.hot_version,
        "episodes": episodes["n"],
        "solved_episodes": episodes["solved"],
        "mean_utility": float(items["mean_utility"]) if items["mean_utility"] is not None else None,
        "adoption_rate": (items["adoptions"] / items["exposures"]) if items["exposures"] else None,
        "params": dataclasses.asdict(params),  # what this handle ranks, credits and consolidates with
        "last_episode_params": last["params"] if last else None,  # what the latest committed episode ran with
    }

"""The episode commit: record an episode, credit what it showed, store what it taught; and audits of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from kernelsage.errors import EpisodeError
from kernelsage.memory_backend import dedup, item_rows, ledger, vector_index
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import REFUSED_DATA, refusal
from kernelsage.memory_backend.items import CommitResult, NamespaceInfo, NewItem
from kernelsage.memory_backend.namespaces import send_counters
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import MemoryPolicy
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, ItemStats, RoundOutcome
from kernelsage.memory_backend.tokens import TokenCounter

MERGE_NEIGHBOURS = 10  # stored experiences nearest to a new one that it may merge into


def commit_episode(conn: psycopg.Connection, info: NamespaceInfo, policy: MemoryPolicy, params: SageParams,
                   episode: EpisodeTrace, new_items: Sequence[NewItem], vectors: Sequence[np.ndarray],
                   count_tokens: TokenCounter, *, isolate_items: bool = False) -> CommitResult:
    """Record an episode, apply the policy's credit and store the experiences it produced (`new_items`
    with their `vectors`). Run it in one transaction; a repeated episode id changes nothing.

    `isolate_items` stores each experience in a savepoint of its own (not in pipeline mode): one the database
    refuses is left out, with the reason in the result's `unstored`, and the episode is recorded all the same.

    Checked first (validation.check_trace, by the caller) and against the retrieval ledger: credit only
    goes to what was shown. Locks in the one order of every item writer: namespace row, then items by id.

    Written for pipeline mode (no COPY; reads sent ahead of the first that is needed): run in it, a commit is
    three round trips (the BEGIN with the namespace lock, the episode id and the ledger; the shown items'
    statistics; every write with the COMMIT), plus three when it stores experiences (the index's lists, the
    merge searches, the new ids).
    """
    read_counters = send_counters(conn, info, for_update=True)  # serialises and numbers the commits
    read_previous = conn.execute(q.EPISODE_SCORE, (info.id, episode.episode_id))
    read_ledger = ledger.send_retrievals(conn, info, episode.episode_id)
    seq = read_counters()["episode_seq"] + 1
    previous = read_previous.fetchone()
    if previous is not None:
        # A resumed run may have retrieved again before repeating its commit: that ledger would wait for a
        # commit that can no longer consume it (until the cleanup of abandoned episodes, days later).
        ledger.forget(conn, info, episode.episode_id)
        added = conn.execute(q.EPISODE_NEW_ITEMS, (info.id, episode.episode_id)).fetchall()
        stored = episode_credits(conn, info, episode.episode_id)
        return CommitResult(episode_id=episode.episode_id, applied=False, terminal_score=previous["terminal_score"],
                            credits={i: c[0] for i, c in stored.items()}, new_item_ids=[r["id"] for r in added],
                            stored_credits=stored)
    episode = replace(episode, hot_version_seen=ledger.check_commit(info, episode, read_ledger()))
    shown = sorted({e.item_id for e in episode.exposures})
    rows = item_rows.fetch_stats(conn, q.STATS_OF_SHOWN_FOR_UPDATE, {"seq": seq, "ns": info.id, "ids": shown})
    stats = {s.item_id: s for s, _ in rows}
    unknown = [i for i in shown if i not in stats]
    if unknown:
        raise EpisodeError(f"episode {episode.episode_id!r} shows items {unknown} "
                           f"that namespace {info.name!r} does not hold")
    update = policy.apply_episode(episode, stats, params)
    _insert_episode(conn, info.id, policy.name, episode, seq, update.terminal_score, params)
    stored = _write_learning(conn, info.id, episode.episode_id, stats, update.stats, update.credits)
    conn.execute(q.SET_EPISODE_SEQ, (seq, info.id))
    ledger.forget(conn, info, episode.episode_id)
    items = [replace(item, source_episode=episode.episode_id) for item in new_items]
    new_ids, merged, unstored = _store_experiences(conn, info, params, items, vectors, seq, count_tokens,
                                                   isolate=isolate_items)
    return CommitResult(episode_id=episode.episode_id, applied=True, terminal_score=update.terminal_score,
                        credits=update.credits, new_item_ids=new_ids, merged_into=merged, stored_credits=stored,
                        unstored=unstored)


def _store_experiences(conn: psycopg.Connection, info: NamespaceInfo, params: SageParams, items: list[NewItem],
                       vectors: Sequence[np.ndarray], seq: int, count_tokens: TokenCounter, *,
                       isolate: bool = False) -> tuple[list[int], list[int], list[str]]:
    """Store an episode's experiences, merging each that says what a stored one (or an earlier one of
    the batch) says into it (dedup.py); returns the new ids and the ids merged into, in item order, and (with
    `isolate`, see commit_episode) why each experience the database refused was left out.

    A merge adds the newcomer's provenance to the stored item's metadata ("merged", "merged_count") and
    changes none of its statistics: the newcomer was never shown, so it has none to add.
    """
    known: dict[int, dedup.Known] = {}
    metadata: dict[int, dict] = {}
    if any(item.kind == "experience" for item in items):
        probes = vector_index.probes_for(vector_index.current_lists(conn, info.id), params.probes)
        conn.execute(q.SEARCH_SETTINGS, (str(probes), "off"))
        searches = [conn.execute(q.nearest_experiences(info.id, info.embedding_dim), {"q": vector, "n": MERGE_NEIGHBOURS})
                    for vector in vectors]  # all sent before the first is read
        for search in searches:
            for row in search.fetchall():
                known[row["id"]] = dedup.Known(row["id"], row["text"], dedup.family(row["operator"], row["metadata"]),
                                               _array(row["embedding"]))
                metadata[row["id"]] = row["metadata"]
    stored = list(known.values())
    targets = dedup.merge_targets(items, vectors, stored, params.merge_similarity)
    keep = [k for k, t in enumerate(targets) if t is None]
    unstored: list[str] = []
    if isolate:
        id_of_new = {}
        for k in keep:
            try:
                with conn.transaction():
                    id_of_new[k] = item_rows.insert_items(conn, info.id, [items[k]], [vectors[k]], seq,
                                                          count_tokens, copy=False)[0]
            except REFUSED_DATA as exc:
                unstored.append(f"experience {k + 1} ({refusal(exc)})")
    else:
        id_of_new = dict(zip(keep, item_rows.insert_items(conn, info.id, [items[k] for k in keep],
                                                          [vectors[k] for k in keep], seq, count_tokens,
                                                          copy=False), strict=True))
    ids = list(id_of_new.values())
    merged: list[int] = []
    for k, target in enumerate(targets):
        if target is None or (target >= len(stored) and target - len(stored) not in id_of_new):
            continue  # a refused experience takes the ones merged into it along: they say the same
        item_id = stored[target].item_id if target < len(stored) else id_of_new[target - len(stored)]
        entry = metadata.setdefault(item_id, dict(items[target - len(stored)].metadata) if target >= len(stored)
                                    else {})
        entry["merged_count"] = int(entry.get("merged_count", 0)) + 1
        entry["merged"] = [*entry.get("merged", []), dedup.provenance(items[k])][-dedup.MAX_PROVENANCES:]
        merged.append(item_id)
    for item_id in dict.fromkeys(merged):
        conn.execute(q.SET_METADATA, (Jsonb(metadata[item_id]), item_id))
    return ids, merged, unstored


def _insert_episode(conn: psycopg.Connection, namespace_id: int, policy: str, episode: EpisodeTrace, seq: int,
                    z: float, params: SageParams) -> None:
    conn.execute(q.INSERT_EPISODE, (
        namespace_id, episode.episode_id, seq, policy, episode.operator, episode.level, episode.t_first,
        episode.t_best, z, episode.hot_version_seen, Jsonb([r.__dict__ for r in episode.rounds]),
        Jsonb(episode.metadata), Jsonb(dataclasses.asdict(params)),
    ))
    exposures = episode.exposures
    conn.execute(q.INSERT_EXPOSURES, (
        namespace_id, episode.episode_id, [e.item_id for e in exposures], [e.round for e in exposures],
        [e.tier for e in exposures], [e.stage for e in exposures], [_float(e.relevance) for e in exposures],
        [_float(e.score) for e in exposures], [e.adopted for e in exposures], [e.rationale for e in exposures],
    ))


def _write_learning(conn: psycopg.Connection, namespace_id: int, episode_id: str, before: dict[int, ItemStats],
                    after: dict[int, ItemStats], credits: dict[int, float]) -> dict[int, tuple[float, float, float]]:
    """Write the new statistics and the credit audit's rows; returns those rows, (credit, utility before,
    utility after) per item, as `episode_credits` reads them back."""
    if not after:
        return {}
    ids = sorted(after)
    new = [after[i] for i in ids]
    conn.execute(q.UPDATE_STATISTICS, (
        ids, [s.utility for s in new], [s.n_ret for s in new], [s.n_ret_cold for s in new],
        [s.n_ado for s in new], [Jsonb(sorted(s.adopting_ops)) for s in new], [s.access for s in new],
        [s.q_draft for s in new], [s.q_refine for s in new],
    ))
    rows = {i: (float(credits.get(i, 0.0)), float(before[i].utility), float(after[i].utility)) for i in ids}
    credit, utility_before, utility_after = (list(column) for column in zip(*rows.values(), strict=True))
    conn.execute(q.INSERT_CREDITS, (namespace_id, episode_id, ids, credit, utility_before, utility_after))
    return rows


def episode_credits(conn: psycopg.Connection, info: NamespaceInfo,
                    episode_id: str) -> dict[int, tuple[float, float, float]]:
    """Stored (credit, utility before, utility after) per item of one committed episode, for audits."""
    rows = conn.execute(q.EPISODE_CREDITS, (info.id, episode_id)).fetchall()
    return {r["item_id"]: (r["credit"], r["utility_before"], r["utility_after"]) for r in rows}


def load_episode(conn: psycopg.Connection, info: NamespaceInfo, episode_id: str) -> EpisodeTrace:
    """A committed episode as it was recorded, so its credit can be recomputed and audited."""
    row = conn.execute(q.EPISODE, (info.id, episode_id)).fetchone()
    if row is None:
        raise EpisodeError(f"namespace {info.name!r} has no episode {episode_id!r}")
    exposures = conn.execute(q.EPISODE_EXPOSURES, (info.id, episode_id)).fetchall()
    return EpisodeTrace(
        **{**row, "rounds": tuple(RoundOutcome(**r) for r in row["rounds"])},
        exposures=tuple(Exposure(**e) for e in exposures),
    )


def _float(value: float | None) -> float | None:
    """A number of an array parameter as a float (one element type per array), None kept."""
    return None if value is None else float(value)


def _array(vector: object) -> np.ndarray:
    """A stored embedding as float32 (the untyped `vector` column arrives as pgvector's Vector)."""
    return np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector, dtype=np.float32)

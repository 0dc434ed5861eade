"""The retrieval ledger: what each retrieval of an episode round showed (item, tier, hot version), and the
check of an episode commit against it. Credit can only go to what the model was really shown, in the tier
it was shown in, and no resident rule shown in a resolved round can be left out of the record.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg

from kernelsage.errors import EpisodeError
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import NamespaceInfo
from kernelsage.memory_backend.records import EpisodeTrace, Tier
from kernelsage.memory_backend.validation import MAX_NAME_CHARS, MAX_ROUNDS, check_text

# An episode whose last retrieval is older than this was abandoned (its worker died, or it was never
# committed): its ledger is removed. Far longer than any episode runs, so a paused run can still commit.
ABANDONED_AFTER = timedelta(days=7)


def check_round(episode_id: str, round_no: int) -> None:
    check_text(episode_id, "the episode id", MAX_NAME_CHARS, required=True, error=EpisodeError)
    if isinstance(round_no, bool) or not isinstance(round_no, int) or not 0 <= round_no <= MAX_ROUNDS:
        raise EpisodeError(f"round {round_no!r} of episode {episode_id!r}: rounds run from 0 to {MAX_ROUNDS}")


def record(conn: psycopg.Connection, info: NamespaceInfo, episode_id: str, round_no: int, hot_version: int,
           shown: list[tuple[int, Tier]]) -> None:
    """Record what one retrieval showed; a repeated retrieval of the same round (a resumed run) replaces it.
    Abandoned episodes' ledgers are removed by commits, not here: a retrieval reads one snapshot, and two
    of them deleting the same rows would make one fail and start again."""
    conn.execute(q.DELETE_RETRIEVAL, (info.id, episode_id, round_no))
    conn.execute(q.INSERT_RETRIEVAL, (info.id, episode_id, round_no, hot_version))
    if shown:
        conn.execute(q.INSERT_RETRIEVAL_ITEMS, (info.id, episode_id, round_no, [i for i, _ in shown],
                                                [t for _, t in shown]))


def send_retrievals(conn: psycopg.Connection, info: NamespaceInfo,
                    episode_id: str) -> Callable[[], list[dict[str, Any]]]:
    """An episode's ledger rows (round, hot version, item, tier), read in two steps: the query is sent now,
    its rows read by the function returned (the commit sends it with its other first reads)."""
    cursor = conn.execute(q.RETRIEVALS_OF_EPISODE, (info.id, episode_id))
    return cursor.fetchall


def check_commit(info: NamespaceInfo, trace: EpisodeTrace, rows: list[dict[str, Any]]) -> int | None:
    """Check the episode's exposures against its ledger (`rows`: `send_retrievals`); returns the hot version
    it saw.

    In every round that has exposures, they must list exactly the items that round's retrieval showed,
    each in the tier it was shown in (rounds without any, e.g. a failed round, credit nothing).
    `hot_version_seen`, when given, must be the version one of its retrievals saw; when missing, the
    version of its last retrieval is recorded.
    """
    name = f"episode {trace.episode_id!r}"
    versions: dict[int, int] = {}
    shown: dict[int, dict[int, str]] = defaultdict(dict)
    for row in rows:
        versions[row["round"]] = row["hot_version"]
        if row["item_id"] is not None:
            shown[row["round"]][row["item_id"]] = row["tier"]
    listed: dict[int, dict[int, str]] = defaultdict(dict)
    for e in trace.exposures:
        listed[e.round][e.item_id] = e.tier
    for round_no, records in sorted(listed.items()):
        if round_no not in versions:
            raise EpisodeError(
                f"{name} has exposures in round {round_no}, but no retrieval of namespace {info.name!r} was "
                f"recorded for that round: retrieve with episode_id and round (or record what was shown with "
                "Memory.show) before committing"
            )
        seen = shown[round_no]
        never = sorted(set(records) - set(seen))
        if never:
            raise EpisodeError(f"{name}, round {round_no}: items {never} were not shown in that round; "
                               "credit can go only to items the retrieval showed")
        wrong = sorted(i for i, tier in records.items() if seen[i] != tier)
        if wrong:
            raise EpisodeError(f"{name}, round {round_no}: items {wrong} are recorded with the wrong tier "
                               f"(shown as {[seen[i] for i in wrong]})")
        missing = sorted(set(seen) - set(records))
        if missing:
            rules = [i for i in missing if seen[i] == "hot"]
            raise EpisodeError(
                f"{name}, round {round_no}: items {missing} were shown but have no adoption record"
                + (f" (resident rules {rules})" if rules else "") + "; every shown item must be resolved"
            )
    if trace.hot_version_seen is not None:
        if versions and trace.hot_version_seen not in versions.values():
            raise EpisodeError(f"{name} says it saw hot-memory version {trace.hot_version_seen}, but its "
                               f"retrievals saw {sorted(set(versions.values()))}")
        return trace.hot_version_seen
    return versions[max(versions)] if versions else None


def forget(conn: psycopg.Connection, info: NamespaceInfo, episode_id: str) -> None:
    """Drop an episode's ledger once it is committed (the exposures are its lasting record), and those of
    abandoned episodes."""
    conn.execute(q.DELETE_RETRIEVALS_OF_EPISODE, (info.id, episode_id))
    forget_abandoned(conn, info)


def forget_abandoned(conn: psycopg.Connection, info: NamespaceInfo) -> int:
    """Remove the ledgers of episodes whose every retrieval is older than ABANDONED_AFTER; returns the
    number of retrievals removed (their shown items go with them)."""
    return conn.execute(q.DELETE_ABANDONED_RETRIEVALS, {"ns": info.id, "age": ABANDONED_AFTER}).rowcount

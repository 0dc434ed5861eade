"""The retrieval ledger does not grow without bound: episodes retrieved for but never committed are removed
by the next commit once all their retrievals are older than ledger.ABANDONED_AFTER; episodes in progress
are kept whole."""

from __future__ import annotations

from dataclasses import replace

from kernelsage.memory_backend import ledger
from kernelsage.memory_backend.store import Memory, MemoryStore
from tests.memory.helpers import episode, seed_items, unit_vectors


def ledger_rows(store: MemoryStore, memory: Memory) -> dict[str, tuple[int, int]]:
    """Per episode: (retrievals, shown items) in the ledger."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT r.episode_id, count(DISTINCT r.round) AS rounds, count(i.item_id) AS items "
            "FROM ks_retrievals r LEFT JOIN ks_retrieval_items i USING (namespace_id, episode_id, round) "
            "WHERE r.namespace_id = %s GROUP BY r.episode_id", (memory.info.id,)).fetchall()
    return {r["episode_id"]: (r["rounds"], r["items"]) for r in rows}


def age(store: MemoryStore, memory: Memory, episode_id: str, rounds: tuple[int, ...]) -> None:
    """Test set-up: date these retrievals back past the abandonment age, as if days had passed."""
    with store.pool.connection() as conn:
        conn.execute("UPDATE ks_retrievals SET shown_at = now() - %s WHERE namespace_id = %s AND episode_id = %s "
                     "AND round = ANY(%s)",
                     (ledger.ABANDONED_AFTER * 1.2, memory.info.id, episode_id, list(rounds)))


def test_abandoned_episodes_leave_the_ledger_and_live_ones_stay(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(6, seed=5))
    memory.show("abandoned", 1, ids[:3])
    memory.show("abandoned", 2, ids[3:])
    memory.show("paused", 1, ids[:2])  # an old first round, a recent second one: still in progress
    memory.show("paused", 2, ids[2:4])
    memory.show("fresh", 1, ids[:1])
    age(store, memory, "abandoned", (1, 2))
    age(store, memory, "paused", (1,))
    assert set(ledger_rows(store, memory)) == {"abandoned", "paused", "fresh"}

    memory.retrieve(unit_vectors(1, seed=6)[0], episode_id="another", round=1)  # retrievals only record
    assert set(ledger_rows(store, memory)) == {"abandoned", "paused", "fresh", "another"}

    # The paused episode commits normally (none of its rounds was taken from it) and removes the abandoned one.
    first, second = episode("paused", "relu", ids[:2], ids[:1]), episode("paused", "relu", ids[2:4], ())
    trace = replace(first, exposures=first.exposures + tuple(e.model_copy(update={"round": 2}) for e in second.exposures))
    assert memory.commit_episode(trace).applied
    assert ledger_rows(store, memory) == {"fresh": (1, 1), "another": (1, 6)}

    # A commit also removes abandoned ledgers: "fresh" and "last" age past the limit after the last recording.
    memory.show("last", 1, ids[:1])
    memory.show("done", 1, ids[4:5])
    age(store, memory, "fresh", (1,))
    age(store, memory, "last", (1,))
    memory.commit_episode(episode("done", "relu", ids[4:5], ids[4:5]))
    assert ledger_rows(store, memory) == {"another": (1, 6)}

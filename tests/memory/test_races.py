"""Several processes on one namespace: commits and consolidation never deadlock, retrieval reads one
snapshot, a fresh namespace is seeded once. Each test runs real processes against the real server."""

from __future__ import annotations

import json
import multiprocessing
import random
import time
from pathlib import Path
from typing import Any

import psycopg

from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import EpisodeTrace, Exposure
from kernelsage.memory_backend.store import Memory, MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors

CHURN = SageParams(k_ado=1, k_op=1, hot_budget_tokens=60)  # every adopted item is validated; the hot set churns
COMMITTERS, EPISODES, CONSOLIDATIONS = 3, 15, 25


def _deadlocks(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]


def _committer(url: str, namespace: str, worker: int) -> None:
    store = MemoryStore(open_pool(url, max_size=1), owns_pool=True, params=CHURN)
    memory = store.open(namespace, create=False)
    rng = random.Random(worker)
    for n in range(EPISODES):
        name = f"w{worker}-e{n}"
        shown = memory.show(name, 1, _some_items(memory, rng)).shown  # resident rules come with them
        exposures = tuple(Exposure(item_id=s.item.id, round=1, tier=s.tier, adopted=rng.random() < 0.6)
                          for s in shown)
        memory.commit_episode(EpisodeTrace(episode_id=name, operator=f"op{rng.randrange(4)}", t_first=2.0,
                                           t_best=rng.uniform(0.5, 2.0), exposures=exposures))
    store.close()


def _some_items(memory: Memory, rng: random.Random) -> list[int]:
    ids = [i.id for state in ("cold", "validated") for i in memory.list_items(state=state, limit=100)]
    return rng.sample(ids, min(len(ids), 25))


def _consolidator(url: str, namespace: str) -> None:
    """Consolidates for as long as the committers commit (however the processes are scheduled), then once more."""
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True, params=CHURN)
    memory = store.open(namespace, create=False)
    for _ in range(CONSOLIDATIONS * 20):
        if memory.info_now().episode_seq >= COMMITTERS * EPISODES:
            break
        memory.consolidate()
    memory.consolidate()
    store.close()


def test_commits_and_consolidation_from_several_processes_never_deadlock(store: MemoryStore, database_url: str,
                                                                         namespace: str) -> None:
    memory = MemoryStore(store.pool, params=CHURN).open(namespace, embedding_dim=16)
    seed_items(memory, unit_vectors(60))
    before = _deadlocks(database_url)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_committer, args=(database_url, namespace, w)) for w in range(COMMITTERS)]
    workers.append(context.Process(target=_consolidator, args=(database_url, namespace)))
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=180)
    assert [p.exitcode for p in workers] == [0] * len(workers)
    assert memory.info_now().episode_seq == COMMITTERS * EPISODES  # no episode lost
    assert memory.info_now().hot_version > 0  # consolidation really changed hot memory meanwhile
    time.sleep(1.0)  # server statistics are flushed shortly after the backends end
    assert _deadlocks(database_url) == before  # one lock order: the server never had to break a cycle


def _flipper(url: str, namespace: str, flips: int, flipping: Any, retrieved: Any) -> None:
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True)
    wide = store.open(namespace, create=False, params=SageParams(k_ado=1, k_op=1))
    none = store.open(namespace, create=False, params=SageParams(k_ado=1, k_op=1, hot_budget_tokens=1))
    n = 0
    # At least `flips`, and on until the retrievals are done (bounded): however the two processes are
    # scheduled, every retrieval meets the churn.
    while (n < flips or not retrieved.is_set()) and n < 50 * flips:
        (wide if n % 2 == 0 else none).consolidate()
        n += 1
        flipping.set()
    store.close()


def _retriever(url: str, namespace: str, out: str, count: int, flipping: Any, retrieved: Any) -> None:
    try:
        store = MemoryStore(open_pool(url, max_size=1), owns_pool=True)
        memory = store.open(namespace, create=False)
        query = unit_vectors(1, seed=9)[0]
        seen = []
        flipping.wait(120)
        for n in range(count):
            found = memory.retrieve(query, k=6, episode_id=f"r{n}", round=1)
            seen.append({"version": found.hot_version, "hot": [s.item.id for s in found.hot],
                         "cold": [s.item.id for s in found.cold]})
        Path(out).write_text(json.dumps(seen))
        store.close()
    finally:
        retrieved.set()


def test_retrieval_reads_one_snapshot_while_rules_are_promoted_and_demoted(store: MemoryStore, database_url: str,
                                                                            namespace: str, tmp_path: Path) -> None:
    memory = MemoryStore(store.pool, params=SageParams(k_ado=1, k_op=1)).open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(8))
    commit(memory, episode("e0", "relu", ids, ids))  # all validated with positive priority
    context = multiprocessing.get_context("spawn")
    out = tmp_path / "seen.json"
    flipping, retrieved = context.Event(), context.Event()
    workers = [context.Process(target=_flipper, args=(database_url, namespace, 60, flipping, retrieved)),
               context.Process(target=_retriever, args=(database_url, namespace, str(out), 300, flipping, retrieved))]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=180)
    assert [p.exitcode for p in workers] == [0, 0]
    with store.pool.connection() as conn:
        events = conn.execute("SELECT h.hot_version, h.item_id, h.event FROM ks_hot_events h JOIN ks_namespaces n "
                              "ON n.id = h.namespace_id WHERE n.name = %s ORDER BY hot_version",
                              (namespace,)).fetchall()
    hot_at: dict[int, set[int]] = {0: set()}
    current: set[int] = set()
    for version in sorted({e["hot_version"] for e in events}):
        for e in events:
            if e["hot_version"] == version:
                (current.add if e["event"] == "promoted" else current.discard)(e["item_id"])
        hot_at[version] = set(current)
    seen = json.loads(out.read_text())
    versions = {s["version"] for s in seen}
    assert len(versions) > 5  # the retrievals really ran during the churn
    for s in seen:
        assert not set(s["hot"]) & set(s["cold"])  # never both hot and cold
        assert set(s["hot"]) == hot_at[s["version"]]  # the hot set is the one of the version it reports


def _opener(url: str, namespace: str, start: float) -> None:
    store = MemoryStore(open_pool(url, max_size=1), owns_pool=True)
    pack = [NewItem(text=f"knowledge {i}", kind="knowledge", embedding=v.tolist())
            for i, v in enumerate(unit_vectors(11, seed=4))]
    time.sleep(max(0.0, start - time.time()))  # everyone opens the fresh namespace at the same moment
    store.open(namespace, embedding_dim=16, seed=lambda: pack)
    store.close()


def test_a_fresh_namespace_opened_by_four_processes_at_once_is_seeded_once(store: MemoryStore, database_url: str,
                                                                            namespace: str) -> None:
    context = multiprocessing.get_context("spawn")
    start = time.time() + 4.0
    workers = [context.Process(target=_opener, args=(database_url, namespace, start)) for _ in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
    assert [p.exitcode for p in workers] == [0] * 4
    memory = store.open(namespace, create=False)
    assert memory.count_items(kind="knowledge") == 11


def _deleter(url: str, prefix: str, start: float) -> None:
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True)
    names = [f"{prefix}-{n}" for n in range(4)]
    for name in names:
        seed_items(store.open(name, embedding_dim=16), unit_vectors(3, seed=len(name)))
    time.sleep(max(0.0, start - time.time()))
    assert store.delete_namespaces(names) == names
    store.close()  # waits for the background drops of the deleted namespaces' indexes


def test_namespaces_deleted_by_three_processes_at_once_leave_no_index_and_no_deadlock(
        store: MemoryStore, database_url: str, namespace: str) -> None:
    """Each delete drops its indexes concurrently afterwards and sweeps any orphan: three sweeps at once meet
    on the same indexes (the simulator's parallel streams did, and a plain DROP INDEX deadlocked there)."""
    from kernelsage.memory_backend import queries as q

    deadlocks = _deadlocks(database_url)
    context = multiprocessing.get_context("spawn")
    start = time.time() + 6.0
    workers = [context.Process(target=_deleter, args=(database_url, f"{namespace}-p{k}", start)) for k in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
    assert [p.exitcode for p in workers] == [0] * 3
    with store.pool.connection() as conn:
        orphans = conn.execute(q.ORPHANED_VECTOR_INDEXES, (q.VECTOR_INDEX_FAMILY,)).fetchall()
    assert orphans == [] and _deadlocks(database_url) == deadlocks
    assert not [n for n in store.list_namespaces() if n.name.startswith(namespace)]

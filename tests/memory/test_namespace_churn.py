"""Namespaces created and deleted while other namespaces grow and have their vector indexes rebuilt: the
server never breaks a deadlock, and nothing is lost. Real processes against the real server.

Each growing process lowers the size at which a namespace leaves exact search (vector_index.EXACT_BELOW) and
the rows per list, so that a few thousand items call for several concurrent builds each.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend import vector_index
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import seed_items, unit_vectors
from tests.memory.test_races import _deadlocks

DIM, GROWN_TO, BATCH = 32, 3_000, 100
EXACT_BELOW, ROWS_PER_LIST = 400, 20  # rebuilds at 400, 600, 900, 1.4K and 2.1K items (20 to 105 lists)
SEEDED, ADDED = 3, 2  # each churned namespace: items stored by its creating transaction, then by a write
START_DELAY_S = 8.0  # the processes import and connect first, then all begin at once


def _items(count: int, seed: int) -> list[NewItem]:
    return [NewItem(text=f"churned item {seed}.{i}", operator="relu", embedding=v.tolist())
            for i, v in enumerate(unit_vectors(count, dim=DIM, seed=seed))]


def _grower(url: str, name: str, seed: int, start: float) -> None:
    vector_index.EXACT_BELOW, vector_index.ROWS_PER_LIST = EXACT_BELOW, ROWS_PER_LIST
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True)
    memory = store.open(name, embedding_dim=DIM)
    time.sleep(max(0.0, start - time.time()))
    for offset in range(0, GROWN_TO, BATCH):
        seed_items(memory, unit_vectors(BATCH, dim=DIM, seed=seed * 100_000 + offset))
    store.index_builds.wait()
    store.close()


def _churner(url: str, prefix: str, start: float, growing: Any, record: str) -> None:
    """Create namespaces (seeded in the creating transaction, then written to) and delete every other one,
    until the growers are done; writes to `record` the names created (with their ids) and deleted, and how
    many creations found no index made (a build was under way)."""
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True)
    created: list[str] = []
    deleted: list[str] = []
    ids: dict[str, int] = {}
    beside_a_build = 0  # creations that found an index build under way (the index is then built after)
    time.sleep(max(0.0, start - time.time()))
    while growing.is_set() or len(created) < 4:
        n = len(created)
        memory = store.open(f"{prefix}-{n}", embedding_dim=DIM, seed=lambda n=n: _items(SEEDED, n))
        created.append(memory.info.name)
        ids[memory.info.name] = memory.info.id
        with store.pool.connection() as conn:
            beside_a_build += vector_index.current_lists(conn, memory.info.id) is None
        memory.add_items(_items(ADDED, 10_000 + n))
        if n % 2:
            store.delete_namespace(created[n - 1])
            deleted.append(created[n - 1])
    store.close()
    Path(record).write_text(json.dumps({"created": created, "deleted": deleted, "ids": ids,
                                         "beside_a_build": beside_a_build}))


def _server_log(url: str) -> Path:
    with psycopg.connect(url) as conn:
        return Path(conn.execute("SHOW data_directory").fetchone()[0]) / "log"


def _deadlock_reports(log: str) -> list[str]:
    """The server's reports of the deadlocks it broke: the error line and what follows it (which processes
    waited for what, holding what, and their statements), up to the next line of another message."""
    reports: list[list[str]] = []
    for line in log.splitlines():
        if "ERROR:  deadlock detected" in line:
            reports.append([line])
        elif reports and len(reports[-1]) < 12 and (line.startswith("\t") or any(
                f"{part}:  " in line for part in ("DETAIL", "HINT", "CONTEXT", "STATEMENT"))):
            reports[-1].append(line)
    return ["\n".join(report) for report in reports]


def test_creating_and_deleting_namespaces_beside_index_builds_never_deadlocks(
        store: MemoryStore, database_url: str, namespace: str, tmp_path: Path) -> None:
    log = _server_log(database_url)
    log_start, before = log.stat().st_size, _deadlocks(database_url)
    context = multiprocessing.get_context("spawn")
    growing = context.Event()
    growing.set()
    start = time.time() + START_DELAY_S
    grown = [f"{namespace}-grown-{k}" for k in range(2)]
    record = tmp_path / "churn.json"
    growers = [context.Process(target=_grower, args=(database_url, name, k + 1, start)) for k, name in enumerate(grown)]
    churner = context.Process(target=_churner, args=(database_url, f"{namespace}-churn", start, growing, str(record)))
    for process in [*growers, churner]:
        process.start()
    for process in growers:
        process.join(timeout=300)
    growing.clear()
    churner.join(timeout=120)
    assert [p.exitcode for p in [*growers, churner]] == [0, 0, 0]

    time.sleep(1.0)  # server statistics are flushed shortly after the backends end
    with log.open(errors="replace") as text:
        text.seek(log_start)
        reports = _deadlock_reports(text.read())
    assert _deadlocks(database_url) - before == len(reports) == 0, "\n\n".join(reports)

    churned = json.loads(record.read_text())
    print(f"{len(churned['created'])} namespaces created, {churned['beside_a_build']} of them during a build; "
          f"{len(churned['deleted'])} deleted")
    kept = [name for name in churned["created"] if name not in churned["deleted"]]
    assert churned["beside_a_build"] > 0  # the churn met the builds it used to deadlock with
    assert len(churned["created"]) >= 4 and len(kept) == len(churned["created"]) - len(churned["deleted"])
    for name in grown:  # every item added is there, and the index has been rebuilt with lists
        memory = store.open(name, read_only=True)  # (this process keeps the usual sizes: it would not check)
        assert memory.count_items() == GROWN_TO
        with store.pool.connection() as conn:
            assert vector_index.current_lists(conn, memory.info.id) > 1
    for name in kept:  # seeded once, written to, searchable
        memory = store.open(name, create=False)
        assert memory.count_items() == SEEDED + ADDED
        assert len(memory.relevance_pool(unit_vectors(1, dim=DIM)[0], size=10)) == SEEDED + ADDED
    assert not any(store.namespace_info(name) for name in churned["deleted"])
    store.index_builds.wait()  # the indexes that opening them made
    with store.pool.connection() as conn:  # and the deleter's drops left no index of a deleted namespace
        orphans = {r["name"] for r in conn.execute(q.ORPHANED_VECTOR_INDEXES, (q.VECTOR_INDEX_FAMILY,))}
    assert not [o for o in orphans for name in churned["deleted"]
                if o.startswith(q.vector_index_prefix(churned["ids"][name]))]


def _create_and_die(url: str, name: str, ready: str) -> None:
    store = MemoryStore(open_pool(url, max_size=2), owns_pool=True)
    store.open(name, embedding_dim=DIM, seed=lambda: _items(SEEDED, 7))
    Path(ready).write_text("created")
    time.sleep(600)  # killed here, its index build still waiting for the turn the test holds


def test_a_namespace_created_during_a_build_is_usable_at_once_and_indexed_when_next_opened(
        store: MemoryStore, database_url: str, namespace: str, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    with store.pool.connection() as build:  # another process's build under way holds the one build lock
        build.autocommit = True
        deadline = time.time() + 60  # (polled, as builds take their turns: a build of another test may be under way)
        while not build.execute(q.VECTOR_INDEX_LOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL)).fetchone()["locked"]:
            assert time.time() < deadline, "the index-build lock stayed taken"
            time.sleep(0.1)
        creator = multiprocessing.get_context("spawn").Process(
            target=_create_and_die, args=(database_url, namespace, str(ready)))
        try:
            creator.start()
            deadline = time.time() + 60
            while not ready.exists() and creator.is_alive() and time.time() < deadline:
                time.sleep(0.1)
        finally:
            creator.kill()  # SIGKILL: no exit handler runs, and the build it asked for never did
            creator.join()
            build.execute(q.VECTOR_INDEX_UNLOCK, (q.INDEX_LOCK_CLASS, q.INDEX_LOCK_ALL))
            build.autocommit = False
    assert ready.exists(), "the creation waited for the build under way"
    reader = store.open(namespace, read_only=True)
    with store.pool.connection() as conn:
        assert vector_index.current_lists(conn, reader.info.id) is None  # created without its index
    vectors = unit_vectors(SEEDED, dim=DIM, seed=7)
    query = unit_vectors(1, dim=DIM, seed=8)[0]
    found = [item.text for item, _ in reader.relevance_pool(query, size=SEEDED)]
    assert found == [f"churned item 7.{i}" for i in np.argsort(-(vectors @ query))]  # seeded once, searched exactly
    writer = MemoryStore(store.pool)
    writer.open(namespace)  # opening for writing checks the index, and builds it
    writer.index_builds.wait()
    with store.pool.connection() as conn:
        assert vector_index.current_lists(conn, reader.info.id) == 1
    assert [item.text for item, _ in reader.relevance_pool(query, size=SEEDED)] == found


def test_no_index_is_built_for_a_namespace_deleted_before_its_check(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=DIM)
    store.delete_namespace(namespace)
    store.index_builds.wait()  # the opening's check and the delete's drop
    assert vector_index.maintain(store.pool, memory.info) is None  # a check that comes late builds nothing
    with store.pool.connection() as conn:
        assert vector_index.current_lists(conn, memory.info.id) is None
        assert not conn.execute("SELECT FROM pg_class WHERE starts_with(relname, %s)",
                                (q.vector_index_prefix(memory.info.id),)).fetchall()

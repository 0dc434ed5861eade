"""A migration that meets a reader of its tables in the other lock order (another process's index maintenance
reads the vectors and the hot events while a newer release upgrades the schema) is aborted by the server's
deadlock check and run again: opening the store still succeeds, and the reader finishes."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from kernelsage.memory_backend import migrations
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.store import MemoryStore

WAITING_ON_HOT_EVENTS = """
    SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE c.relname = 'ks_hot_events' AND NOT l.granted AND l.pid <> %s
"""


def test_a_migration_aborted_by_a_deadlock_is_run_again(empty_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = open_pool(empty_database)
    try:
        with monkeypatch.context() as old:  # the schema as release 5 left it: migration 6 alters both tables
            old.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:5])
            MemoryStore(pool)
        with psycopg.connect(empty_database) as reader, psycopg.connect(empty_database, autocommit=True) as watch:
            # The reader holds the hot events and will ask for the vectors; its own deadlock check waits longer
            # than the server's default, so the check that finds the cycle is the migration's.
            reader.execute("SET deadlock_timeout = '30s'")
            reader.execute("SELECT count(*) FROM ks_hot_events").fetchone()
            opened: list[object] = []
            upgrade = threading.Thread(target=lambda: opened.append(_open(pool)))
            upgrade.start()
            deadline = time.monotonic() + 60
            while not watch.execute(WAITING_ON_HOT_EVENTS, (reader.info.backend_pid,)).fetchone()[0]:
                assert time.monotonic() < deadline, "the migration never waited for the reader"
                time.sleep(0.05)
            # the migration holds the vectors (its first ALTER) and waits for the hot events: the cycle closes
            reader.execute("SELECT count(*) FROM ks_item_vectors").fetchone()
            reader.commit()
            upgrade.join(timeout=120)
        (store,) = opened
        assert isinstance(store, MemoryStore), store
        assert store.applied_migrations() == [v for v, _, _ in migrations.MIGRATIONS]
    finally:
        pool.close()  # its connections exit, and with them the count of the deadlock they met
    assert _deadlocks(empty_database) >= 1, "no deadlock happened: the test did not exercise the retry"


def _deadlocks(url: str) -> int:
    """The server's count of deadlocks in this database (a backend reports it at the latest when it exits)."""
    deadline = time.monotonic() + 15
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            count = conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
                                 ).fetchone()[0]
            if count or time.monotonic() > deadline:
                return int(count)
            time.sleep(0.1)


def _open(pool: object) -> object:
    try:
        return MemoryStore(pool)  # type: ignore[arg-type]
    except Exception as exc:  # the assertion names it
        return exc

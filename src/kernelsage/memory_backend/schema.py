"""Applying the schema: the numbered migrations of migrations.py, each recorded once, under a lock."""

from __future__ import annotations

import psycopg

from kernelsage.memory_backend import migrations as m
from kernelsage.memory_backend.queries import LOCK_CLASS


def migrate(conn: psycopg.Connection) -> list[int]:
    """Apply the migrations this database lacks; returns the versions applied now.

    Run it inside a transaction: the advisory lock it takes lasts until the transaction ends, so two
    openers never migrate at once and the second finds nothing left to do.
    """
    conn.execute(m.MIGRATION_LOCK, (LOCK_CLASS,))
    conn.execute(m.CREATE_MIGRATIONS_TABLE)
    done = set(applied_migrations(conn))
    applied: list[int] = []
    for version, name, statements in m.MIGRATIONS:
        if version in done:
            continue
        conn.execute(statements)  # type: ignore[arg-type]  # fixed DDL text of migrations.py
        conn.execute(m.RECORD_MIGRATION, (version, name))
        applied.append(version)
    return applied


def applied_migrations(conn: psycopg.Connection) -> list[int]:
    """The versions recorded in this database, ascending."""
    return [r["version"] for r in conn.execute(m.APPLIED_MIGRATIONS)]

"""Fixtures of the memory tests beyond the session's database (tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo


@pytest.fixture
def empty_database(database_url: str) -> Iterator[str]:
    """A database of its own on the session's server (migrations are per database), dropped afterwards."""
    name = f"ks_migration_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(database_url, dbname=name)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

"""Reaching the database: clear failures, never a raw driver traceback."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kernelsage.errors import DatabaseError
from kernelsage.memory_backend.database import database_url, ensure_vector_extension, redact


def test_an_unreachable_server_is_reported_after_bounded_retries(tmp_path) -> None:
    url = f"postgresql://postgres:secret@/postgres?host={tmp_path}/no-server-here"
    with pytest.raises(DatabaseError, match=r"cannot reach the memory database.*after 4 attempts") as caught:
        ensure_vector_extension(url)
    assert "secret" not in str(caught.value)


def test_a_server_without_pgvector_is_named_with_what_to_do(database_url: str) -> None:
    role = f"ks_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {role} OWNER {role}")
    params = conninfo_to_dict(database_url) | {"user": role, "dbname": role}
    # pgvector is not a trusted extension: an ordinary owner cannot create it.
    with pytest.raises(DatabaseError, match=r"no usable pgvector extension.*CREATE EXTENSION vector"):
        ensure_vector_extension(make_conninfo("", **params))


def test_database_url_prefers_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@db.example.invalid:5432/memory")
    assert database_url() == "postgresql://u:p@db.example.invalid:5432/memory"


def test_redact_hides_the_password() -> None:
    assert "p4ss" not in redact("postgresql://user:p4ss@localhost:5432/db")
    assert "user" in redact("postgresql://user:p4ss@localhost:5432/db")

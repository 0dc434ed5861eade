"""Shared fixtures: a real embedded PostgreSQL with pgvector for the whole test session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.store import MemoryStore


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh embedded PostgreSQL 18 + pgvector server, deleted when the session ends."""
    pgserver = pytest.importorskip("pgserver", reason="the embedded server (kernelsage[embedded]) is required")
    server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()


@pytest.fixture(scope="session")
def store(database_url: str) -> Iterator[MemoryStore]:
    memory_store = MemoryStore(open_pool(database_url, max_size=8), owns_pool=True)
    yield memory_store
    memory_store.close()


@pytest.fixture
def namespace() -> str:
    """A namespace name no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"



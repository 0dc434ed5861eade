"""Shared fixtures: a real embedded PostgreSQL with pgvector for the whole test session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import vector_crash
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.tasks.loaders import LoadReport, load_suite
from kernelsage.tools.backend import KernelBackend, get_backend
from tests.graph.fakes import fake_embeddings


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh embedded PostgreSQL 18 + pgvector server, deleted when the session ends."""
    pgserver = pytest.importorskip("pgserver", reason="the embedded server (kernelsage[embedded]) is required")
    data_dir = tmp_path_factory.mktemp("pgdata")
    server = pgserver.get_server(data_dir, cleanup_mode="delete")
    _stop_unless_vectors_work(server.get_uri(), data_dir)
    yield server.get_uri()
    server.cleanup()


def _stop_unless_vectors_work(url: str, data_dir: Path) -> None:
    """One line instead of a hundred 'server closed the connection' failures when pgvector cannot run here."""
    message = vector_crash(url, data_dir)
    if message is not None:
        pytest.exit(f"{message} (scripts/pgvector_for_this_cpu.sh builds one)", returncode=1)


@pytest.fixture(scope="session")
def store(database_url: str) -> Iterator[MemoryStore]:
    memory_store = MemoryStore(open_pool(database_url, max_size=8), owns_pool=True)
    yield memory_store
    memory_store.close()


@pytest.fixture
def namespace() -> str:
    """A namespace name no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"




@pytest.fixture(scope="session")
def cpu_backend() -> Iterator[KernelBackend]:
    backend = get_backend("cpu", trials=2, reps=20)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def suite() -> LoadReport:
    return load_suite("builtin")


@pytest.fixture
def seeded(store: MemoryStore, namespace: str) -> list[int]:
    """Three experiences in a fresh namespace."""
    memory = store.open(namespace, embeddings=fake_embeddings())
    return memory.add_items([
        NewItem(text="Parallelise elementwise loops with #pragma omp parallel for", operator="l1_add"),
        NewItem(text="Return 0 from ks_kernel and end every statement with a semicolon", operator="l1_abs"),
        NewItem(text="Handle float16 by converting through float with the header helpers", operator="l1_sigmoid"),
    ])

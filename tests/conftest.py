"""Shared fixtures: a real embedded PostgreSQL with pgvector for the whole test session."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# Two workers (README's `-n 2 --dist loadfile`) finish together only when the units that take minutes start first:
# pytest-xdist's own order (most tests first) left them for last, where both workers ran Ray clusters at once
# (each slowed the other by up to 3x) or one ran a long file while the other idled. The Ray tests are one unit, so
# no two clusters share the machine. Order only: every test still runs.
RAY_UNIT = "tests/scale"
LONGEST_UNITS = (RAY_UNIT, "tests/evals/test_commands.py")  # minutes each in CI; then files with slow tests


def work_unit(nodeid: str) -> str:
    """The unit one xdist worker runs whole: the test's file, or the Ray tests' folder."""
    path = nodeid.split("::", 1)[0]
    return RAY_UNIT if path.startswith(RAY_UNIT + "/") else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest units first (above); the tests of a unit keep their order."""
    units = [work_unit(item.nodeid) for item in items]
    sizes = Counter(units)
    slow = {unit for unit, item in zip(units, items, strict=True) if item.get_closest_marker("slow")}

    def rank(position: int) -> tuple[int, int, int]:
        unit = units[position]
        known = LONGEST_UNITS.index(unit) if unit in LONGEST_UNITS else len(LONGEST_UNITS) + (unit not in slow)
        return known, -sizes[unit], position

    items[:] = [items[i] for i in sorted(range(len(items)), key=rank)]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with the Ray tests as one unit, in the collection's order (above)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return LongestFirst(config, log)


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

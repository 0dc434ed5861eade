"""Fixtures of the kernel-tool tests: one warm cpu backend for the session, task suites, kernel sources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import LoadReport, find_task, load_suite
from kernelsage.tasks.model import Task
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.results import Candidate
from kernelsage.tools.sandbox import Limits

TESTS = Path(__file__).resolve().parent.parent
KERNELS = TESTS / "tools" / "kernels"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"


@pytest.fixture(scope="session")
def cpu_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuBackend]:
    """A cpu backend with a private build cache and a short wall-clock limit, so a hang ends quickly."""
    backend = CpuBackend(cache_dir=tmp_path_factory.mktemp("builds"), reps=20, warmup=2,
                         run_limits=Limits(wall_s=4, cpu_s=20))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def builtin() -> LoadReport:
    return load_suite("builtin")


@pytest.fixture(scope="session")
def relu32() -> Task:
    return find_task(load_suite(TESTS / "fixtures" / "suite"), "relu32")


@pytest.fixture(scope="session")
def build(cpu_backend: CpuBackend):
    """Compile a kernel file (a name in tests/tools/kernels or a path) for a task id."""

    def compile_file(task_id: str, kernel: str | Path):
        path = kernel if isinstance(kernel, Path) else KERNELS / kernel
        return cpu_backend.compile(Candidate(task_id=task_id, files={"kernel.cpp": path.read_text()}))

    return compile_file


@pytest.fixture(scope="session")
def small_memory_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuBackend]:
    """A cpu backend whose children may map only 256 MiB more than the worker, so a memory bomb ends fast."""
    backend = CpuBackend(cache_dir=tmp_path_factory.mktemp("builds-small"),
                         run_limits=Limits(wall_s=10, cpu_s=20, memory_bytes=256 << 20))
    yield backend
    backend.close()

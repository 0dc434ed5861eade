"""Fixtures of the tuning tests: one warm cpu backend with a private build cache, short profiles."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.sandbox import Limits


@pytest.fixture(scope="session")
def tuning_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuBackend]:
    """One verify trial and 10 timed calls a profile: the tests check decisions, not speeds."""
    backend = CpuBackend(cache_dir=tmp_path_factory.mktemp("tuning-builds"), trials=1, reps=10, warmup=1,
                         run_limits=Limits(wall_s=30, cpu_s=60))
    yield backend
    backend.close()

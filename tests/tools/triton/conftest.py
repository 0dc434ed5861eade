"""Fixtures of the triton backend's tests: one warm backend on the interpreter for the module, l1_relu."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the triton extra is not installed (pip install -e '.[triton]')")

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tasks.model import Task
from kernelsage.tools.results import Artifact
from kernelsage.tools.sandbox import Limits
from kernelsage.tools.triton.backend import TritonBackend

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def triton_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonBackend]:
    """Two trials (enough for answers kept across calls to show); the interpreter's start is the cost."""
    backend = TritonBackend(device="interpret", cache_dir=tmp_path_factory.mktemp("triton-builds"), trials=2,
                            run_limits=Limits(wall_s=90, cpu_s=180))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def l1_relu() -> Task:
    return find_task(load_suite("builtin", task_ids=["l1_relu"]), "l1_relu")


def unchecked_artifact(source: str, folder: Path) -> Artifact:
    """An artifact made without the source check: what a candidate that fooled the check would get."""
    path = folder / "kernel.py"
    path.write_text(source, encoding="utf-8")
    return Artifact(backend="triton", path=str(path), key="unchecked",
                    sha256=hashlib.sha256(source.encode()).hexdigest())

"""The install-time probe that decides whether pgvector must be rebuilt for this CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.memory_backend import vector_probe


def test_the_probe_finds_the_installed_pgvector_working(tmp_path: Path, database_url: str) -> None:
    # database_url first: the session's own check has already stopped the run where pgvector crashes
    pytest.importorskip("pgserver")
    code, line = vector_probe.probe(tmp_path / "pgdata")
    assert (code, line) == (vector_probe.WORKS, "pgvector runs on this CPU")
    assert not (tmp_path / "pgdata").exists()


"""The install-time probe that decides whether pgvector must be rebuilt for this CPU."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelsage.memory_backend import vector_probe


def test_the_probe_finds_the_installed_pgvector_working(database_url: str) -> None:
    # database_url first: the session's own check has already stopped the run where pgvector crashes.
    # Not under pytest's base temp: another pytest session starting meanwhile resets it to 0700, which
    # locks out the server's own user when the tests run as root.
    pytest.importorskip("pgserver")
    with tempfile.TemporaryDirectory(prefix="kernelsage-test-probe-") as tmp:
        code, line = vector_probe.probe(Path(tmp) / "pgdata")
        assert (code, line) == (vector_probe.WORKS, "pgvector runs on this CPU")
        assert not (Path(tmp) / "pgdata").exists()

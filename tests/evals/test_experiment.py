"""An experiment's memories: the frozen file always honoured or refused; run metadata kept for reports."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tests.graph.fakes import fake_embeddings

from kernelsage.errors import ConfigurationError
from kernelsage.evals.experiment import Experiment, hot_rules, prepare_memories
from kernelsage.evals.records import RunMetadata, read_run_metadata, write_run_metadata
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.memory_backend.transfer import export_jsonl


def _texts(store: MemoryStore, name: str) -> list[str]:
    return sorted(item.text for item in store.open(name, read_only=True).list_items())


def test_a_missing_frozen_memory_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no such file"):
        Experiment(run_id="r", run_dir=tmp_path / "run", model="replay:x", frozen_memory=tmp_path / "nope.jsonl")
    result = subprocess.run(
        [sys.executable, "-m", "kernelsage", "run", "--model", "replay:none.jsonl", "--frozen-memory",
         "/nonexistent.jsonl", "--run-id", "frozen-missing"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, env={**os.environ, "DATABASE_URL": "unused"})
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "/nonexistent.jsonl: no such file" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_the_frozen_file_is_used_even_when_the_starting_namespace_exists(store: MemoryStore, tmp_path: Path) -> None:
    start, source = f"start-{uuid.uuid4().hex[:8]}", f"source-{uuid.uuid4().hex[:8]}"
    embeddings = fake_embeddings()
    store.open(start, embeddings=embeddings).add_items([NewItem(text="what the starting namespace holds")])
    store.open(source, embeddings=embeddings).add_items([NewItem(text="what the frozen file holds")])
    frozen = tmp_path / "frozen.jsonl"
    export_jsonl(store, source, frozen)
    experiment = Experiment(run_id=f"f{uuid.uuid4().hex[:6]}", run_dir=tmp_path / "run", model="replay:x",
                            policies=["sage", "static"], namespace=start, frozen_memory=frozen)
    prepare_memories(store, experiment, embeddings, "cpu")
    for policy in experiment.policies:
        assert _texts(store, experiment.policy_namespace(policy)) == ["what the frozen file holds"]
    assert _texts(store, start) == ["what the starting namespace holds"]  # untouched
    assert hot_rules(store, experiment) == {"sage": [], "static": []}


def test_run_metadata_round_trips_and_keeps_what_a_report_needs(tmp_path: Path) -> None:
    assert read_run_metadata(tmp_path) is None
    metadata = RunMetadata(run_id="r", model="replay:recording.jsonl", replayed=True, notes=["a note"])
    write_run_metadata(tmp_path, metadata)
    assert read_run_metadata(tmp_path) == metadata
    (tmp_path / "run.json").write_text("{broken")
    with pytest.raises(ConfigurationError, match="unreadable run metadata"):
        read_run_metadata(tmp_path)

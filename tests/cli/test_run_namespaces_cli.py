"""The memory a run learned in, as a user finds it: listed with its run id, opened by run id, deleted.

The commands run in this process (typer's CliRunner: output captured as through a pipe, 80 columns wide);
tests/cli/test_memory_cli.py runs them as separate processes.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from kernelsage.cli import app
from kernelsage.memory_backend.namespaces import namespaces_of_run, parse_run_namespace, run_namespace
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors

WIDTH = 80


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str  # the error's message, as `kernelsage` prints it after "error:"


def _run(database_url: str, *args: str) -> Ran:
    """The command with its output captured (not a terminal, so rich draws 80 columns wide)."""
    result = CliRunner().invoke(app, list(args), env={"DATABASE_URL": database_url, "COLUMNS": str(WIDTH)})
    error = result.exception if result.exception and not isinstance(result.exception, SystemExit) else None
    return Ran(2 if error else result.exit_code, result.stdout, str(error) if error else result.stderr)


def fits(text: str, *words: str) -> None:
    """Every line fits the width, and every word a reader must copy appears whole on one line."""
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    for word in words:
        assert any(word in line for line in lines), f"{word!r} is broken across lines:\n{text}"


@pytest.fixture
def run_memory(store: MemoryStore) -> tuple[str, list[str]]:
    """A run with two policies, each in its own copy of a starting namespace; one learned an episode."""
    run_id = f"r{uuid.uuid4().hex[:8]}"
    names = [run_namespace("cpu/cpp/default", run_id, policy) for policy in ("sage", "uniform")]
    for name in names:
        store.open(name, embedding_dim=16)
    memory = store.open(names[0], embedding_dim=16)
    ids = seed_items(memory, unit_vectors(3))
    commit(memory, episode("e1", "relu", ids, ids[:1]))
    return run_id, names


def test_run_namespace_names_parse_back() -> None:
    name = run_namespace("cpu/cpp/default", "2026-12-02/a", "sage")
    place = parse_run_namespace(name)
    assert (place.start, place.run_id, place.policy) == ("cpu/cpp/default", "2026-12-02/a", "sage")
    assert parse_run_namespace("frozen/copy").run_id == "" and parse_run_namespace("a@b").run_id == ""
    assert namespaces_of_run([name, "x@other/sage", "plain"], "2026-12-02/a") == [name]


def test_namespaces_are_listed_with_their_run_and_policy(database_url: str, run_memory: tuple[str, list[str]]) -> None:
    run_id, names = run_memory
    listed = json.loads(_run(database_url, "memory", "namespaces", "--json").stdout)
    mine = {n["name"]: n for n in listed if n["run_id"] == run_id}
    assert set(mine) == set(names)
    assert {n["policy"] for n in mine.values()} == {"sage", "uniform"}
    assert all(n["start"] == "cpu/cpp/default" for n in mine.values())
    table = _run(database_url, "memory", "namespaces")
    assert table.returncode == 0, table.stderr
    fits(table.stdout, *names, run_id)


def test_a_run_id_opens_the_namespace_it_learned_in(database_url: str, run_memory: tuple[str, list[str]]) -> None:
    run_id, names = run_memory
    ambiguous = _run(database_url, "memory", "stats", "--run", run_id)
    assert ambiguous.returncode == 2 and "add --policy" in ambiguous.stderr and "Traceback" not in ambiguous.stderr
    stats = _run(database_url, "memory", "stats", "--run", run_id, "--policy", "sage", "--json")
    assert json.loads(stats.stdout)["namespace"] == names[0] and json.loads(stats.stdout)["episodes"] == 1
    human = _run(database_url, "memory", "stats", "--run", run_id, "--policy", "sage")
    assert human.returncode == 0 and "{" not in human.stdout  # words, not Python dicts
    assert re.search(r"items\s+3 \(3 cold, 0 validated, 0 hot\)", human.stdout), human.stdout
    fits(human.stdout, names[0])
    shown = _run(database_url, "memory", "show", "--run", run_id, "--policy", "sage")
    assert shown.returncode == 0
    fits(shown.stdout, "experience", "utility")
    unknown = _run(database_url, "memory", "stats", "--run", "no-such-run")
    assert unknown.returncode == 2 and "no namespace of run 'no-such-run'" in unknown.stderr
    both = _run(database_url, "memory", "stats", "-n", names[1], "--run", run_id, "--policy", "sage")
    assert both.returncode == 2 and "give one of them" in both.stderr  # not silently the run's namespace


def test_delete_asks_for_confirmation_and_removes_a_runs_namespaces(
        database_url: str, run_memory: tuple[str, list[str]], store: MemoryStore) -> None:
    run_id, names = run_memory
    refused = _run(database_url, "memory", "delete", "--run", run_id)
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    assert all(store.namespace_info(name) is not None for name in names)  # nothing deleted without consent
    missing = _run(database_url, "memory", "delete", names[0], "not-there", "--yes")
    assert missing.returncode == 2 and "'not-there'" in missing.stderr
    assert store.namespace_info(names[0]) is not None  # all or nothing
    deleted = _run(database_url, "memory", "delete", "--run", run_id, "--yes", "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert sorted(json.loads(deleted.stdout)["deleted"]) == sorted(names)
    assert all(store.namespace_info(name) is None for name in names)

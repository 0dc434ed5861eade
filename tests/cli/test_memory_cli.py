"""`kernelsage memory ...` as a user runs it: a real process against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage import __version__
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors


def _run(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture
def evolved(store: MemoryStore, namespace: str) -> list[int]:
    memory = MemoryStore(store.pool, params=SageParams(k_ado=1, k_op=1)).open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(4))
    commit(memory, episode("e1", "relu", ids[:2], ids[:1]))
    memory.consolidate()
    return ids


def test_version() -> None:
    result = subprocess.run([sys.executable, "-m", "kernelsage", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"kernelsage {__version__}"


def test_stats_show_and_hot_as_json(database_url: str, namespace: str, evolved: list[int]) -> None:
    stats = json.loads(_run(database_url, "memory", "stats", "-n", namespace, "--json").stdout.splitlines()[-1])
    assert stats["items"] == 4 and stats["episodes"] == 1 and stats["by_state"]["hot"] == 1
    shown = json.loads(_run(database_url, "memory", "show", "-n", namespace, "--json").stdout)
    assert next(i["id"] for i in shown) == evolved[0]  # highest utility first
    one = json.loads(_run(database_url, "memory", "show", str(evolved[1]), "-n", namespace, "--json").stdout)
    assert one[0]["utility"] == pytest.approx(-0.2)
    hot = json.loads(_run(database_url, "memory", "hot", "-n", namespace, "--json").stdout)
    assert [r["id"] for r in hot["rules"]] == [evolved[0]] and hot["budget"] == 10_000
    table = _run(database_url, "memory", "hot", "-n", namespace)
    assert table.returncode == 0 and "hot memory v1" in table.stdout


def test_export_and_import_through_the_command_line(database_url: str, namespace: str, evolved: list[int],
                                                     tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    exported = _run(database_url, "memory", "export", str(path), "-n", namespace, "--json")
    assert exported.returncode == 0 and json.loads(exported.stdout)["records"] > 4
    imported = _run(database_url, "memory", "import", str(path), "-n", namespace + "-copy", "--json")
    assert imported.returncode == 0 and json.loads(imported.stdout)["items"] == 4
    again = _run(database_url, "memory", "import", str(path), "-n", namespace + "-copy")
    assert again.returncode == 2 and "exists already" in again.stderr and "Traceback" not in again.stderr


def test_expected_failures_print_one_line_and_exit_non_zero(database_url: str) -> None:
    missing = _run(database_url, "memory", "stats", "-n", "no-such-namespace")
    assert missing.returncode == 2
    assert "namespace 'no-such-namespace' does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_state = _run(database_url, "memory", "show", "--state", "lukewarm")
    assert bad_state.returncode == 2 and "unknown state 'lukewarm'" in bad_state.stderr
    unreachable = _run("postgresql://postgres@/postgres?host=/nonexistent-socket-dir", "memory", "namespaces")
    assert unreachable.returncode == 2 and "cannot reach the memory database" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


def test_without_database_url_the_embedded_server_keeps_memory_across_runs(
    store: MemoryStore, namespace: str, evolved: list[int], tmp_path: Path
) -> None:
    from kernelsage.memory_backend.transfer import export_jsonl

    path = tmp_path / "memory.jsonl"
    export_jsonl(store, namespace, path)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"KERNELSAGE_HOME": str(tmp_path / "home")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, env=env,
                              timeout=120)

    assert run("memory", "import", str(path), "-n", "carried").returncode == 0
    listed = run("memory", "namespaces", "--json")  # a new process, a restarted server, the same data
    assert listed.returncode == 0
    assert [n["name"] for n in json.loads(listed.stdout)] == ["carried"]
    assert (tmp_path / "home" / "pgdata" / "PG_VERSION").exists()


def test_seed_a_namespace_from_a_folder_of_markdown(database_url: str, namespace: str, tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Team notes\n\n## Tiling\nUse 64x64 tiles for fp32 matmul.\n\n"
                                       "## Tails\nHandle the remainder of every blocked loop.\n")
    first = _run(database_url, "memory", "seed", str(tmp_path), "-n", namespace, "--json")
    assert first.returncode == 0, first.stderr
    assert len(json.loads(first.stdout)["seeded"]) == 2
    again = _run(database_url, "memory", "seed", str(tmp_path), "-n", namespace, "--json")
    assert json.loads(again.stdout)["seeded"] == []
    empty = _run(database_url, "memory", "seed", str(tmp_path / "nothing"), "-n", namespace)
    assert empty.returncode == 2 and "no Markdown" in empty.stderr


def test_parameters_per_run_are_used_recorded_and_shown(database_url: str, namespace: str, evolved: list[int]) -> None:
    stats = json.loads(_run(database_url, "memory", "stats", "-n", namespace, "--param", "B=4000", "-p", "gamma=0.5",
                            "--json").stdout)
    assert stats["hot_budget"] == 4000 and stats["params"]["gamma"] == 0.5
    assert stats["last_episode_params"]["k_ado"] == 1  # the episode was committed with K_ado = 1
    env = {**os.environ, "DATABASE_URL": database_url, "KERNELSAGE_PARAMS": "B=123"}
    hot = subprocess.run([sys.executable, "-m", "kernelsage", "memory", "hot", "-n", namespace, "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(hot.stdout)["budget"] == 123
    bad = _run(database_url, "memory", "stats", "-n", namespace, "--param", "gamma=2")
    assert bad.returncode == 2 and "gamma=2.0 must lie in [0, 1]" in bad.stderr and "Traceback" not in bad.stderr


def test_set_up_errors_are_one_line(database_url: str, namespace: str, evolved: list[int], tmp_path: Path) -> None:
    bad_url = _run("not a connection string", "memory", "namespaces")
    assert bad_url.returncode == 2 and "DATABASE_URL is not a valid PostgreSQL connection string" in bad_url.stderr
    assert len(bad_url.stderr.strip().splitlines()) == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"KERNELSAGE_HOME": str(blocker / "home")}
    home = subprocess.run([sys.executable, "-m", "kernelsage", "memory", "namespaces"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert home.returncode == 2 and "cannot create the memory's data directory" in home.stderr
    assert len(home.stderr.strip().splitlines()) == 1
    missing = _run(database_url, "memory", "export", str(tmp_path / "no" / "m.jsonl"), "-n", namespace)
    assert missing.returncode == 2 and "does not exist; create it" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_db_names_a_directory_even_when_it_is_called_postgres(tmp_path: Path) -> None:
    from kernelsage.cli.common import store_url
    from kernelsage.errors import ConfigurationError

    folder = tmp_path / "postgres-data"
    folder.mkdir()
    with pytest.raises(ConfigurationError, match="no memory database there"):
        store_url(str(folder))

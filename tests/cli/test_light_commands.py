"""Commands that answer at once load only what they use (issue 34): in a fresh process, `--version`, every
`--help`, `report`, `tasks list` and the memory commands leave torch, LangGraph, LangChain and the model stack
unimported, and `report` draws its plots with matplotlib's Agg backend. Each process runs the real commands and
writes down, after each, the modules it added and its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command

from kernelsage.cli import app
from kernelsage.cli.task_listing import listing_key

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "evals" / "fixtures" / "records" / "two_policies.jsonl"

# Runs each command line of argv[1] (JSON) in turn and writes what each loaded into the file argv[2].
PROBE = """
import json, sys
from typer.main import get_command
from kernelsage.cli import app

command, seen = get_command(app), []
for argv in json.loads(sys.argv[1]):
    before = set(sys.modules)
    try:
        command.main(argv, prog_name="kernelsage")
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    matplotlib = sys.modules.get("matplotlib")
    seen.append({"argv": argv, "code": code, "added": sorted(set(sys.modules) - before),
                 "backend": matplotlib.get_backend() if matplotlib else None})
with open(sys.argv[2], "w") as out:
    json.dump(seen, out)
"""

# What a command that runs no model, kernel or graph has no use for.
# (kernelsage.models.limits is plain settings: the advice of a report quotes it.)
MODEL_STACK = ("torch", "langgraph", "langchain", "openai", "httpx", "sentence_transformers", "transformers",
               "triton", "kernelsage.models.factory", "kernelsage.models.cassette", "kernelsage.models.retry",
               "kernelsage.graph.builder", "kernelsage.graph.nodes", "kernelsage.graph.runner")
# What printing a help text or the version has no use for either.
HELP_STACK = (*MODEL_STACK, "matplotlib", "numpy", "psycopg", "kernelsage.evals",
              "kernelsage.memory_backend.store", "kernelsage.tasks.loaders")


def heavy(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    """The modules of `forbidden` among `modules`: a package and its submodules (`langchain` names every
    langchain* distribution)."""
    def matches(module: str, name: str) -> bool:
        if name == "langchain":
            return module.startswith("langchain")
        return module == name or module.startswith(name + ".")

    return sorted({name for module in modules for name in forbidden if matches(module, name)})


def probe(tmp_path: Path, *command_lines: list[str], env: dict[str, str] | None = None) -> list[dict]:
    out = tmp_path / f"probe-{len(list(tmp_path.glob('probe-*')))}.json"
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(command_lines), str(out)], capture_output=True,
                          text=True, timeout=300, check=False, cwd=tmp_path, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def every_help() -> list[list[str]]:
    """`--help` of the app, of each command and of each group's commands, from the app itself (so a new
    command is covered without being listed here)."""
    lines = [["--help"]]
    for name, command in get_command(app).commands.items():
        lines.append([name, "--help"])
        lines += [[name, sub, "--help"] for sub in getattr(command, "commands", {})]
    return lines


def test_the_version_loads_nothing_heavy(tmp_path: Path) -> None:
    (seen,) = probe(tmp_path, ["--version"])
    assert seen["code"] == 0 and heavy(seen["added"], HELP_STACK) == []


def test_every_help_loads_nothing_heavy(tmp_path: Path) -> None:
    seen = probe(tmp_path, *every_help())
    assert len(seen) > 15  # the groups' commands are there too
    loaded = {" ".join(s["argv"]): heavy(s["added"], HELP_STACK) for s in seen}
    assert {line: names for line, names in loaded.items() if names} == {}
    assert all(s["code"] == 0 for s in seen)


def test_report_draws_with_agg_and_loads_no_model_stack(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for line in RECORDS.read_text().splitlines():
        with (run_dir / f"{json.loads(line)['policy']}.jsonl").open("a") as records:
            records.write(line + "\n")
    (seen,) = probe(tmp_path, ["report", str(run_dir)])
    assert seen["code"] == 0 and (run_dir / "report" / "report.html").is_file()
    assert len(list((run_dir / "report" / "plots").glob("*.png"))) == 5
    assert heavy(seen["added"], MODEL_STACK) == []
    assert seen["backend"].lower() == "agg" and "matplotlib.pyplot" in seen["added"]


def test_tasks_list_answers_from_the_cache_without_torch(tmp_path: Path) -> None:
    cache = {"KERNELSAGE_CACHE": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-m", "kernelsage", "tasks", "list", "--json"], capture_output=True,
                           text=True, timeout=300, check=False, env={**os.environ, **cache})
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-m", "kernelsage", "tasks", "list", "--json"], capture_output=True,
                           text=True, timeout=300, check=False, env={**os.environ, **cache})
    assert json.loads(again.stdout) == json.loads(first.stdout) and len(json.loads(first.stdout)["tasks"]) > 10
    (seen,) = probe(tmp_path, ["tasks", "list", "--level", "2"], env=cache)
    assert seen["code"] == 0 and heavy(seen["added"], MODEL_STACK) == []


def test_the_cached_listing_follows_the_files_of_the_tasks_package(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "tasks"
    (package / "suites").mkdir(parents=True)
    (package / "suites" / "level1.py").write_text("TASKS = []\n")
    monkeypatch.setattr("kernelsage.cli.task_listing.TASKS_PACKAGE", package)
    key = listing_key("auto", None)
    assert listing_key("auto", None) == key  # nothing changed: the same entry
    assert len({key, listing_key("auto", "64MiB"), listing_key("suite", None)}) == 3
    (package / "suites" / "level1.py").write_text("TASKS = [None]\n")
    edited = listing_key("auto", None)
    (package / "suites" / "level2.py").write_text("TASKS = []\n")
    assert len({key, edited, listing_key("auto", None)}) == 3
    monkeypatch.setenv("KERNELSAGE_TOLERANCE", "1e-5")
    assert listing_key("auto", None) != edited


def _memory_lines(namespace: str) -> list[list[str]]:
    return [["memory", "namespaces", "--json"], ["memory", "stats", "-n", namespace, "--json"],
            ["memory", "show", "-n", namespace, "--json"], ["memory", "hot", "-n", namespace]]


def test_memory_commands_load_no_model_stack(tmp_path: Path, database_url: str, namespace: str,
                                             seeded: list[int]) -> None:
    seen = probe(tmp_path, *_memory_lines(namespace), env={"DATABASE_URL": database_url})
    assert [s["code"] for s in seen] == [0, 0, 0, 0]
    assert {" ".join(s["argv"]): heavy(s["added"], MODEL_STACK) for s in seen
            if heavy(s["added"], MODEL_STACK)} == {}


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    """The check above can fail: a command that loads torch is caught."""
    (seen,) = probe(tmp_path, ["tasks", "show", "l1_relu", "--json"], env={"KERNELSAGE_CACHE": str(tmp_path)})
    assert seen["code"] == 0 and "torch" in heavy(seen["added"], MODEL_STACK)

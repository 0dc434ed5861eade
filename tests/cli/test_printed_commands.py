"""Commands kernelsage prints paste as they are: they begin the way this kernelsage was started
(`.venv/bin/kernelsage` after `make demo`, which is not on PATH), and `check --source` given a directory
says it is a directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.cli.invocation import program
from kernelsage.demo.run import inspect_commands


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory with a virtual environment's entry point and python, as `make demo` leaves."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("kernelsage", "python"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    return bin_dir


def test_the_entry_point_is_named_as_it_was_run_unless_path_finds_it(venv: Path) -> None:
    assert program(".venv/bin/kernelsage", path="/usr/bin") == ".venv/bin/kernelsage"
    assert program(str(venv / "kernelsage"), path="/usr/bin") == ".venv/bin/kernelsage"  # relative to here
    assert program(str(venv / "kernelsage"), path=f"/usr/bin{os.pathsep}{venv}") == "kernelsage"  # activated venv
    elsewhere = Path("/") / "opt" / "kernelsage"  # does not exist: not taken for an entry point
    assert program(str(elsewhere), executable=str(venv / "python"), path="/usr/bin") == ".venv/bin/python -m kernelsage"


def test_a_module_run_is_named_with_its_interpreter(venv: Path) -> None:
    main = "/somewhere/kernelsage/__main__.py"
    assert program(main, executable=str(venv / "python"), path="/usr/bin") == ".venv/bin/python -m kernelsage"
    assert program(main, executable=str(venv / "python"), path=str(venv)) == "python -m kernelsage"
    assert program(main, executable="/usr/local/bin/python3", path="/usr/bin") == "/usr/local/bin/python3 -m kernelsage"


def test_the_demo_closes_with_commands_that_begin_as_it_was_run(tmp_path: Path) -> None:
    commands = inspect_commands(Path("runs/demo"), ".venv/bin/kernelsage")
    assert commands[0] == ".venv/bin/kernelsage memory namespaces --db runs/demo/db"
    assert all(c.startswith(".venv/bin/kernelsage memory ") for c in commands)
    spaced = inspect_commands(tmp_path / "my runs", "kernelsage")
    assert f"--db '{tmp_path}/my runs/db'" in spaced[0]  # a path with a space stays one argument


def test_a_printed_command_runs_as_printed(tmp_path: Path) -> None:
    """The demo's first command, as this test's kernelsage prints it (`<python> -m kernelsage`), runs."""
    env = {**os.environ, "DATABASE_URL": "", "KERNELSAGE_HOME": str(tmp_path / "home")}
    printed = subprocess.run([sys.executable, "-c", "from kernelsage.cli.invocation import program; print(program())"],
                             capture_output=True, text=True, cwd=tmp_path, env=env, check=True).stdout.strip()
    assert printed.endswith(" -m kernelsage")
    version = subprocess.run(f"{printed} --version", shell=True, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert version.returncode == 0 and version.stdout.startswith("kernelsage "), version.stderr


def test_check_given_a_directory_says_it_is_a_directory(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kernelsage", "check", "--task", "l1_relu", "--source",
                             str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "KERNELSAGE_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{tmp_path} is a directory, not a source file" in result.stderr
    assert "no such source file" not in result.stderr and "kernelsage eval" in result.stderr

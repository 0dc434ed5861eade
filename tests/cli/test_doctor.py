"""`kernelsage doctor` reads like a verdict: every check, then how many problems and which, each with its fix,
also on stderr; exit code 1 exactly when a required check fails. The failures are real: a database URL on a
closed port, an unknown embedding spec."""

from __future__ import annotations

import importlib
import io
import json
import socket

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kernelsage.cli import app
from kernelsage.cli.doctor import Check, check_database, check_embeddings, check_model, run_check
from kernelsage.cli.doctor_verdict import check_list, verdict_line

doctor_module = importlib.import_module("kernelsage.cli.doctor")  # the package exports the command by this name


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A database nobody listens for, an embedding spec nobody knows, no chat model (optional: a warning)."""
    monkeypatch.setattr(doctor_module, "CHECKS", (check_database, check_embeddings, check_model))
    monkeypatch.setenv("DATABASE_URL", f"postgresql://doctor@127.0.0.1:{closed_port()}/nothing")
    monkeypatch.setenv("KERNELSAGE_EMBEDDINGS", "bogus:model")
    monkeypatch.delenv("KERNELSAGE_MODEL", raising=False)


def test_failures_end_in_a_verdict_with_their_fixes_on_stderr_and_exit_code_1(broken) -> None:
    result = CliRunner().invoke(app, ["doctor", "--offline"])
    assert result.exit_code == 1
    stderr = result.stderr.splitlines()
    assert stderr[0] == "2 problems: memory database, embeddings; 1 warning: chat model"
    problems = " ".join(result.stderr.split())
    assert "FAIL memory database: cannot reach the memory database" in problems
    assert "fix: start the server or fix DATABASE_URL" in problems
    assert "FAIL embeddings: unknown embeddings 'bogus:model'" in problems
    assert "fix: set KERNELSAGE_EMBEDDINGS to local:all-MiniLM-L6-v2" in problems
    assert "chat model" not in problems.split("1 warning: chat model", 1)[1]  # a warning is no problem
    listed = " ".join(result.stdout.split())
    assert "warn chat model: KERNELSAGE_MODEL is not set" in listed and listed.count("FAIL") == 2
    assert "Traceback" not in result.output


def test_under_json_stdout_is_the_checks_and_stderr_the_problems(broken) -> None:
    result = CliRunner().invoke(app, ["doctor", "--offline", "--json"])
    assert result.exit_code == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert [checks[name]["status"] for name in ("memory database", "embeddings", "chat model")] == \
        ["fail", "fail", "warn"]
    assert all(c["required"] for c in checks.values())
    assert result.stderr.startswith("2 problems: memory database, embeddings")


def test_no_problem_exits_0_with_the_local_model_checked_without_loading_it(monkeypatch) -> None:
    monkeypatch.setattr(doctor_module, "CHECKS", (check_embeddings, check_model))
    monkeypatch.delenv("KERNELSAGE_EMBEDDINGS", raising=False)
    monkeypatch.delenv("KERNELSAGE_MODEL", raising=False)
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0 and result.stderr == ""
    text = " ".join(result.stdout.split())
    assert "ok embeddings: local:all-MiniLM-L6-v2: files present in" in text and "dimension 384" in text
    assert "not loaded" in text  # says what it checked
    assert text.endswith("no problems: every required check passed (2 checks; 1 warning: chat model)")


def test_an_optional_probe_that_fails_only_warns(monkeypatch) -> None:
    monkeypatch.setenv("KERNELSAGE_EMBEDDINGS", "bogus:model")
    (required,) = run_check(check_embeddings, required=True, offline=True, deep=False)
    (optional,) = run_check(check_embeddings, required=False, offline=True, deep=False)
    assert (required.status, required.required) == ("fail", True) and "KERNELSAGE_EMBEDDINGS" in required.fix
    assert (optional.status, optional.required) == ("warn", False) and optional.detail == required.detail
    assert verdict_line([optional]) == "no problems: every required check passed (1 check; 1 warning: embeddings)"


CHECKS = [
    Check("chat model", "warn", "openai:glm-4.6 answered, but slow: 31.2 s for a 16-token answer",
          "a writing prompt will take far longer: set KERNELSAGE_MODEL_TIMEOUT (now 60 s) and "
          "KERNELSAGE_MODEL_DEADLINE to fit it (docs/models.md)"),
    Check("triton npu-frontend", "ok", "triton-ascend 3.2.0 at /work/main/.venv-triton-ascend/bin/python: compiles "
                                       "through ast-to-ttir, ttir, ttadapter"),
    Check("memory database", "fail", "cannot reach user=u dbname=x host=127.0.0.1 port=9 after 4 attempts",
          "start the server or fix DATABASE_URL"),
]


@pytest.mark.parametrize("width", [40, 57, 80, 101, 160])
def test_no_word_is_cut_at_any_width(width: int) -> None:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(check_list(CHECKS))
    lines = out.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    printed = {word for line in lines for word in line[5:].split()}  # past the status column
    written = {word for c in CHECKS for word in f"{c.name}: {c.detail} fix: {c.fix}".split()}
    fits = {word for word in written if len(word) <= width - 5}
    assert fits <= printed, sorted(fits - printed)

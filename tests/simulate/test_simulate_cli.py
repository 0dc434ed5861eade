"""`kernelsage simulate` as a user runs it: a real process against the real database (the generator is the
simulator's stochastic stand-in, no model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from kernelsage.cli import app
from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend.store import MemoryStore


def _run(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "-m", "kernelsage", "simulate", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_json_per_policy_with_intervals_and_a_report(database_url: str, store: MemoryStore, tmp_path: Path) -> None:
    before = {n.name for n in store.list_namespaces()}
    result = _run(database_url, "--policies", "sage,none", "--orders", "mixed,level:3", "--seeds", "2",
                  "--episodes", "5", "--sweep", "beta=0,0.4", "--sweep-policies", "sage", "--out", str(tmp_path),
                  "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.splitlines()[-1])
    assert set(data["policies"]) == {"sage", "none"} and set(data["orders"]) == {"mixed", "level:3"}
    for name in ("er", "fast1", "credit_accuracy", "hot_precision"):
        figure = data["policies"]["sage"][name]
        assert set(figure) >= {"mean", "low", "high", "n", "values"} and len(figure["values"]) == 2
        if name in ("er", "fast1"):  # defined in every stream: an interval over both seeds
            assert figure["n"] == 2 and figure["low"] <= figure["mean"] <= figure["high"]
    assert data["policies"]["none"]["credit_accuracy"]["mean"] is None  # learns nothing: undefined, not 0
    assert data["policies"]["none"]["hot_precision"]["mean"] is None
    assert data["orders"]["level:3"]["policies"]["sage"]["level3_er"] == data["orders"]["level:3"]["policies"]["sage"]["er"]
    assert data["invariant_problems"] == []
    assert "stand-in" in data["model"]
    assert [s["parameter"] for s in data["sweeps"]] == ["beta"] and len(data["sweeps"][0]["policies"]["sage"]) == 2
    report = (tmp_path / "report.md").read_text()
    assert "stand-in" in report and "Sweep of beta" in report
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {
        "learning_curves.png", "utility_vs_true_value.png", "hot_composition.png", "sweep_beta.png"}
    assert {n.name for n in store.list_namespaces()} == before  # every stream's namespace was removed


def test_bad_arguments_are_configuration_errors_naming_the_problem() -> None:
    # In-process: the command raises the error that `kernelsage` prints as one line (cli.common.run_guarded).
    runner = CliRunner()
    for args, message in ((["--orders", "level:7"], "levels 1, 2 and 3"),
                          (["--policies", "sage,magic"], "unknown memory policy 'magic'"),
                          (["--sweep", "colour=1,2"], "cannot read sweep"),
                          (["--standin", "false_claim=2"], "rates lie in [0, 1]")):
        result = runner.invoke(app, ["simulate", *args, "--episodes", "2", "--seeds", "1", "--no-report"])
        assert isinstance(result.exception, ConfigurationError) and message in str(result.exception), args

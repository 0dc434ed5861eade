"""`run` and `compare --tuning-budget N` (or KERNELSAGE_TUNING_BUDGET) reach every policy's episodes; a budget
that cannot tune is refused before anything heavy loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.evals.experiment import Experiment, stream_context


def test_the_experiments_tuning_budget_reaches_each_policys_context(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELSAGE_TUNING_BUDGET", raising=False)
    experiment = Experiment(run_id="t", run_dir=tmp_path, model="openai:m", policies=["sage", "none"],
                            tuning_budget=6)
    assert [stream_context(experiment, p).tuning_budget for p in ("sage", "none")] == [6, 6]
    unset = Experiment(run_id="t", run_dir=tmp_path, model="openai:m")
    assert stream_context(unset, "sage").tuning_budget == 0  # off unless asked
    monkeypatch.setenv("KERNELSAGE_TUNING_BUDGET", "4")
    assert stream_context(unset, "sage").tuning_budget == 4
    with pytest.raises(ConfigurationError, match="tuning budget 1"):
        Experiment(run_id="t", run_dir=tmp_path, model="openai:m", tuning_budget=1)


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_budget_that_cannot_tune_is_refused_in_one_line(command: str, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kernelsage", command, "--model", "openai:m", "--tuning-budget",
                             "1", "--run-id", "t"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: tuning budget 1: give 0 (no tuning) or at least 2 (one compile and one profile of the default)"]
    assert not (tmp_path / "runs").exists()

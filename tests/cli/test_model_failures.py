"""A run whose model never produced anything ends non-zero, after writing its records and report, with one
line naming the cause and the endpoint; a stream the model stopped says so in run.json and in the report.

The endpoint is a local OpenAI-compatible test double that misbehaves on purpose (tests.models.openai_server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelsage.evals.records import EpisodeRecord
from kernelsage.graph.records import Attempt
from tests.models.openai_server import embeddings_env, error, garbage, serve

ENDPOINT = "http://127.0.0.1:9/v1"


def _record(task_id: str, *statuses: str, failure: str | None = None, position: int = 0) -> EpisodeRecord:
    attempts = [Attempt(round=n, stage="draft", status=status,
                        detail=f"model endpoint {ENDPOINT}/chat/completions: gave up after 1 attempt: 500"
                        if status == "model_error" else "")
                for n, status in enumerate(statuses, start=1)]
    return EpisodeRecord(task_id=task_id, episode_id=f"r1/sage:{position}:{task_id}", level=1, solved=False,
                         rounds=len(attempts), candidates=0, compiled=0, run_id="r1/sage", policy="sage",
                         model="openai:m@127.0.0.1", backend="cpu", namespace="ns@r1/sage", position=position,
                         attempts=attempts, failure=failure)


def test_a_run_whose_every_round_failed_on_the_model_ends_with_one_line_naming_the_endpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelsage.cli.runs import _finish
    from kernelsage.evals.experiment import Experiment
    from kernelsage.evals.records import RunMetadata, write_run_metadata

    experiment = Experiment(run_id="r1", run_dir=tmp_path / "r1", model="openai:m")
    write_run_metadata(experiment.run_dir, RunMetadata(run_id="r1", model="openai:m@127.0.0.1", endpoint=ENDPOINT))
    problem = _finish(experiment, {"sage": [_record("l1_relu", "model_error", "model_error")]}, as_json=False)
    assert problem is not None and "failed in 1 of 1 episodes" in problem and ENDPOINT in problem
    assert "l1_relu" in problem and str(experiment.run_dir) in problem and "\n" not in problem
    out = capsys.readouterr().out
    assert "0 of 0" not in out and "no code was produced" in out  # not "compiled 0 of 0", "beat PyTorch 0 of 0"
    markdown = (experiment.run_dir / "report" / "report.md").read_text()
    assert "Policy sage: no code was produced (2 rounds: model_error 2)" in markdown


def test_a_run_where_no_round_produced_code_is_a_failure_too() -> None:
    from kernelsage.evals.verdict import run_problem

    records = {"sage": [_record("l1_relu", "parse_error", "truncated"), _record("l1_add", "parse_error", position=1)]}
    problem = run_problem(records, model=f"openai:m at {ENDPOINT}")
    assert problem is not None and problem.startswith("no round produced code (3 rounds: parse_error 2, truncated 1)")
    assert ENDPOINT in problem
    produced = {"sage": [*records["sage"], _record("l1_abs", "compile_error", position=2)]}
    produced["sage"][-1].attempts[0].files["kernel.cpp"] = "int ks_kernel("
    assert run_problem(produced, model="openai:m") is None  # a model that wrote wrong code did its part


@pytest.mark.slow
def test_a_stream_stopped_by_a_failing_endpoint_ends_non_zero_and_says_why_everywhere(
        database_url: str, tmp_path: Path) -> None:
    run_id = f"down-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1", "KERNELSAGE_MODEL_API_KEY": "sk-test",
           "KERNELSAGE_MODEL_ATTEMPTS": "1", "KERNELSAGE_MODEL_TIMEOUT": "2", "KERNELSAGE_CACHE": str(tmp_path / "c")}
    with serve([error(500), garbage()]) as server:  # every call fails: an HTTP 500, then a body that is no JSON
        result = subprocess.run(
            [sys.executable, "-m", "kernelsage", "run", "--model", "openai:test-model", "--order", "level:1",
             "--limit", "4", "--budget", "3", "--run-id", run_id, "--namespace", f"down-{run_id}"],
            capture_output=True, text=True, cwd=tmp_path, timeout=300, stdin=subprocess.DEVNULL,
            env={**env, "KERNELSAGE_MODEL_BASE_URL": server.url, **embeddings_env(server.url)})
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "stopped early: policy sage ran 3 of 4 operators" in errors[0] and server.url in errors[0]
    run_dir = tmp_path / "runs" / run_id
    assert len((run_dir / "sage.jsonl").read_text().splitlines()) == 3  # written before the exit
    stopped = json.loads((run_dir / "run.json").read_text())["stopped"]
    assert (stopped["policy"], stopped["episodes"], stopped["operators"]) == ("sage", 3, 4)
    assert "failed 3 episodes in a row" in stopped["reason"]
    markdown = (run_dir / "report" / "report.md").read_text()
    assert "The run stopped early: policy sage ran 3 of 4 operators" in markdown
    assert "stopped early" in result.stdout  # the summary says it too

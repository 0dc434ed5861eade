"""What the stream commands print, as a user or a script reads it: pure JSON on stdout under --json with
progress on stderr, tables that fit 80 columns when piped, plain words, and Ctrl-C naming the run to resume.

The model is a local OpenAI-compatible test double (tests.models.openai_server) answering with the CPU
backend's reference kernel; everything else is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.evals.test_report import FIXTURE
from tests.graph.scripts import candidate, example_source
from tests.models.openai_server import answer, embeddings_env, serve
from tests.scale.helpers import shared_build_cache

WIDTH = 80


def _env(database_url: str, server_url: str, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": database_url, "COLUMNS": str(WIDTH), "HF_HUB_OFFLINE": "1",
            "KERNELSAGE_MODEL_BASE_URL": server_url, "KERNELSAGE_MODEL_API_KEY": "sk-test",
            "KERNELSAGE_MODEL_ATTEMPTS": "1", "KERNELSAGE_CACHE": str(shared_build_cache(tmp_path)),
            **embeddings_env(server_url)}


def _stream_args(run_id: str, namespace: str) -> list[str]:
    return ["--model", "openai:test-model", "--order", "level:1", "--limit", "1", "--budget", "1", "--run-id", run_id,
            "--namespace", namespace]


def _kernelsage(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_run_and_compare_print_pure_json(database_url: str, tmp_path: Path) -> None:
    run_id, namespace = f"out-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    with serve([answer(candidate(example_source("l1_relu")))]) as server:
        env = _env(database_url, server.url, tmp_path)
        result = _kernelsage(["run", *_stream_args(run_id, namespace), "--json"], env, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        payload = json.loads(result.stdout)  # the whole of stdout is one JSON document
        assert payload["run_id"] == run_id and payload["namespaces"] == {"sage": f"{namespace}@{run_id}/sage"}
        assert payload["summary"]["sage"]["overall"]["er"]["n"] == 1
        assert "1/1" in result.stderr  # the progress went to stderr
        compared = _kernelsage(["compare", "--policies", "none", *_stream_args(run_id + "c", namespace), "--json"],
                               env, tmp_path)
        assert compared.returncode == 0, compared.stderr[-3000:]
        assert set(json.loads(compared.stdout)["summary"]) == {"none"}


def test_the_human_summary_fits_80_columns_and_speaks_plainly(tmp_path: Path, capsys,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelsage.cli.common import console
    from kernelsage.cli.runs import _finish
    from kernelsage.evals.experiment import Experiment
    from kernelsage.evals.records import group_by_policy, read_records

    monkeypatch.setattr(console, "width", WIDTH)  # as piped, whatever terminal runs the tests
    records = group_by_policy(read_records(FIXTURE))
    experiment = Experiment(run_id="r1", run_dir=tmp_path / "r1", model="replay:demo", policies=list(records))
    _finish(experiment, records, as_json=False)
    out = capsys.readouterr().out
    tables = [line for line in out.splitlines() if not line.startswith(("report:", "records:", "memory:"))]
    assert all(len(line) <= WIDTH for line in tables), "\n".join(tables)
    for whole in ("l2_gemm_bias", "l3_attention", "compile_error", "solved (ER)", "execution rate"):
        assert any(whole in line for line in tables), f"{whole!r} is broken across lines:\n{out}"
    assert "2.00x slower than the" in out  # l1_softmax of the policy without memory, in words
    assert "{" not in out and "Summary(" not in out
    assert "kernelsage memory stats --run r1 --policy POLICY" in out  # begun as kernelsage was started


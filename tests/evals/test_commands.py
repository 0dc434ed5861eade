"""The evaluation commands as a user runs them: eval on ready kernels, report, and the offline demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _kernelsage(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def test_eval_scores_a_directory_of_ready_kernels(tmp_path: Path) -> None:
    examples = Path(str(resources.files("kernelsage.tools.cpu").joinpath("examples")))
    (tmp_path / "kernels").mkdir()
    for source in examples.glob("*.cpp"):
        (tmp_path / "kernels" / source.name).write_text(source.read_text())
    (tmp_path / "kernels" / "l1_add.cpp").write_text(examples.joinpath("l1_relu.cpp").read_text())  # wrong op
    result = _kernelsage("eval", str(tmp_path / "kernels"), "--json", "--output", str(tmp_path / "eval.jsonl"))
    assert result.returncode == 1, result.stderr  # one kernel is wrong: as `check` on it, after the whole output
    assert "error: 1 of" in result.stderr and "(l1_add)" in result.stderr
    payload = json.loads(result.stdout)  # the whole of stdout is one JSON document
    status = {k["task_id"]: k["status"] for k in payload["kernels"]}
    assert status["l1_add"] != "ok" and status["l3_matmul"] == "ok" and status["l2_softmax"] == "ok"
    er = payload["summary"]["overall"]["er"]
    assert (er["n"], er["total"]) == (len(status) - 1, len(status))
    timed = [k["speedup_median"] for k in payload["kernels"] if k["status"] == "ok"]
    assert timed and all(s["low"] <= s["median"] <= s["high"] for s in timed)  # medians, with their interval
    assert payload["speedup_median"]["n"] == len(timed)
    report = _kernelsage("report", str(tmp_path), "--json")
    assert report.returncode == 0, report.stderr
    assert Path(json.loads(report.stdout)["report"]).is_file()


def test_eval_prints_a_table_in_words_that_fits_80_columns(tmp_path: Path) -> None:
    examples = Path(str(resources.files("kernelsage.tools.cpu").joinpath("examples")))
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "l1_relu.cpp").write_text(examples.joinpath("l1_relu.cpp").read_text())
    (tmp_path / "kernels" / "l1_add.cpp").write_text("int ks_kernel(")  # does not compile
    result = _kernelsage("eval", str(tmp_path / "kernels"), env={"COLUMNS": "80"})
    assert result.returncode == 1, result.stderr  # l1_add does not compile
    table = result.stdout.split("\ncorrect (ER")[0].splitlines()
    assert all(len(line) <= 80 for line in table), result.stdout
    assert "Summary(" not in result.stdout and "compile_error" in result.stdout
    relu = next(line for line in table if line.lstrip().startswith("l1_relu"))
    assert "than PyTorch" in relu or "about as fast as PyTorch" in relu
    assert "correct (ER, execution rate): 1 of 2 kernels" in result.stdout
    assert "median over correct kernels:" in result.stdout


def test_eval_and_report_name_bad_input_in_one_line(tmp_path: Path) -> None:
    missing = _kernelsage("eval", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr and "Traceback" not in missing.stderr
    empty = _kernelsage("report", str(tmp_path))
    assert empty.returncode == 2 and "no <policy>.jsonl record files" in empty.stderr


@pytest.mark.slow
def test_the_offline_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {"KERNELSAGE_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": ""}
    env.pop("DATABASE_URL", None)
    env |= {"DATABASE_URL": ""}
    result = _kernelsage("demo", "--out", "demo", "--json", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    narrative = " ".join(result.stderr.split())  # the narrative goes to stderr, the replay said first
    assert "replayed from a recording" in narrative.split("l1_relu")[0]
    payload = json.loads(result.stdout)  # the whole of stdout is one JSON document
    assert [e["solved"] for e in payload["episodes"]] == [True] * 6
    assert payload["hot_rules"], "at least one rule must be promoted into hot memory"
    html = Path(payload["report"]).read_text()
    assert html.count("data:image/png;base64,") == 5 and "replayed from a recording" in html
    records = [json.loads(line) for line in (tmp_path / "demo" / "sage.jsonl").read_text().splitlines()]
    statuses = [a["status"] for r in records for a in r["attempts"]]
    assert "compile_error" in statuses and "wrong_result" in statuses
    assert {r["level"] for r in records} == {1, 2, 3}
    assert all(r["memory"]["credits"] for r in records)
    # The memory stays under the demo's directory, and the commands the demo names show what it learned.
    assert payload["database"] == "demo/db" and (tmp_path / "demo" / "db" / "PG_VERSION").exists()
    listed = json.loads(_kernelsage("memory", "namespaces", "--db", "demo/db", "--json", env=env, cwd=tmp_path).stdout)
    assert {(n["run_id"], n["policy"]) for n in listed} >= {("demo", "sage")}
    stats = _kernelsage("memory", "stats", "--db", "demo/db", "--run", "demo", "--json", env=env, cwd=tmp_path)
    assert json.loads(stats.stdout)["episodes"] == 6 and json.loads(stats.stdout)["by_state"]["hot"] >= 1
    # begun as this kernelsage was started (here `<python> -m kernelsage`), so that they paste as printed
    assert any(c.endswith("kernelsage memory stats --db demo/db --run demo") for c in payload["inspect"])
    # A report written again from the run directory keeps the banner and the hot rules.
    again = _kernelsage("report", "demo", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    markdown = (tmp_path / "demo" / "report" / "report.md").read_text()
    assert "replayed from a recording" in markdown and payload["hot_rules"][0]["text"] in markdown


def _demo_script(request: dict) -> object:
    """The scripted double that made the demo's recording, answering over HTTP from each prompt (labelled: not a
    model). Unlike a replay of the recording, it answers whatever this machine's verdicts made the prompt say:
    on a busy machine a round can miss a speed verdict the recording has, which a replay would refuse."""
    from tests.models.openai_server import as_messages, completion

    from kernelsage.demo.script import demo_answer

    message = demo_answer(as_messages(request))
    calls = [{"name": call["name"], "args": call["args"]} for call in message.tool_calls]
    return completion(str(message.content), tool_calls=calls or None)


def test_run_records_a_stream_and_a_rerun_resumes_without_repeating_it(tmp_path: Path) -> None:
    from tests.models.openai_server import embeddings_env, serve

    from kernelsage.demo.script import DEMO_TASKS

    order = tmp_path / "order.txt"
    order.write_text("\n".join(DEMO_TASKS[:2]) + "\n")
    args = ("run", "--model", "openai:demo-script", "--order", f"file:{order}", "--budget", "3", "--top-k", "64",
            "--run-id", "r1", "--json")
    with serve([_demo_script]) as server:
        env = {"KERNELSAGE_HOME": str(tmp_path / "home"), "DATABASE_URL": "", "KERNELSAGE_MODEL_API_KEY": "sk-test",
               "KERNELSAGE_MODEL_BASE_URL": server.url, **embeddings_env(server.url)}
        first = _kernelsage(*args, env=env, cwd=tmp_path)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        summary = json.loads(first.stdout)["summary"]["sage"]["overall"]
        assert (summary["er"]["n"], summary["er"]["total"]) == (2, 2)
        records = (tmp_path / "runs" / "r1" / "sage.jsonl").read_text().splitlines()
        asked = len(server.requests)
        again = _kernelsage(*args, env=env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr[-2000:]
        assert (tmp_path / "runs" / "r1" / "sage.jsonl").read_text().splitlines() == records  # nothing ran twice
        assert len(server.requests) == asked  # and the model was asked nothing
        stats = _kernelsage("memory", "stats", "--run", "r1", "--json", env=env, cwd=tmp_path)  # as `run` says
    assert json.loads(stats.stdout)["episodes"] == 2 and json.loads(stats.stdout)["namespace"] == "cpu/cpp/default@r1/sage"


def test_run_against_a_rejecting_endpoint_ends_in_one_line_and_a_non_zero_exit(database_url: str,
                                                                                tmp_path: Path) -> None:
    from tests.models.openai_server import error, serve

    env = {"DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1", "KERNELSAGE_MODEL_API_KEY": "sk-wrong",
           "KERNELSAGE_MODEL_TIMEOUT": "2", "KERNELSAGE_MODEL_ATTEMPTS": "1"}
    with serve([error(401, "invalid api key")]) as server:
        result = _kernelsage("run", "--model", "openai:test-model", "--order", "level:1", "--limit", "1",
                             "--budget", "1", "--run-id", "r401", "--namespace", f"cli401-{tmp_path.name}",
                             env={**env, "KERNELSAGE_MODEL_BASE_URL": server.url}, cwd=tmp_path)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "rejected the API key" in errors[0] and "Traceback" not in result.stderr
    assert len(server.requests) == 1

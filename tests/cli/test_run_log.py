"""A run that says what it is doing where no live board is drawn (a log file, CI, nohup): one timestamped line
per event on stderr, flushed at once, as text or as one JSON object per line; nothing added on a terminal.

The end-to-end tests run `kernelsage run` as a real subprocess whose stderr is a pipe, against the local
OpenAI-compatible test double (tests.models.openai_server); everything else is real.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelsage.cli.run_log import EventFormatter, event_lines
from kernelsage.graph.runner_events import emit, episode_started, step_events
from tests.cli.test_output import _env, _kernelsage, _stream_args
from tests.graph.scripts import candidate, example_source
from tests.models.openai_server import answer, error, serve

TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d"


def _attempt(number: int, status: str, *, latency: float | None = None, reference: float | None = None,
             detail: str = "") -> dict:
    evaluation = None if latency is None and status in ("parse_error", "model_error") else {
        "status": status, "correct": latency is not None, "latency": latency, "reference_latency": reference}
    return {"round": number, "status": status, "evaluation": evaluation, "detail": detail}


def test_two_states_in_a_row_tell_the_rounds_judged_and_the_commit() -> None:
    before = {"task_id": "l1_relu", "budget": 3, "attempts": [_attempt(1, "compile_error")]}
    after = {**before, "attempts": [*before["attempts"], _attempt(2, "ok", latency=0.002, reference=0.005),
                                     _attempt(3, "model_error", detail="gave up after 2 attempts\nsecond line")]}
    events = step_events(before, after)
    assert [e.name for e in events] == ["round", "round"]  # round 1 was said before
    assert events[0].message == "l1_relu round 2/3: ok, 2.50x the reference's speed (2.000 ms)"
    assert events[0].fields["speedup"] == pytest.approx(2.5) and events[0].fields["correct"] is True
    assert events[1].message == "l1_relu round 3/3: model_error (gave up after 2 attempts)"
    committed = {**after, "memory_update": {"updated": True, "terminal_score": 0.5, "credits": {"4": 0.5, "7": -0.2},
                                            "new_items": [9], "consolidation": {"promoted": [4]}}}
    [commit] = step_events(after, committed)
    assert commit.name == "commit" and "2 items credited (terminal score +0.500)" in commit.message
    assert commit.fields["new_items"] == [9] and commit.fields["promoted"] == [4]
    assert step_events(committed, committed) == []  # nothing new, nothing said


def _record(event: str, message: str, **fields) -> logging.LogRecord:
    record = logging.LogRecord("kernelsage.events", logging.INFO, __file__, 1, message, None, None)
    record.event, record.fields = event, fields
    return record


def test_a_text_line_is_timestamped_and_one_line_and_a_json_line_keeps_the_fields() -> None:
    record = _record("round", "l1_relu round 1/3:\ncompile_error", round=1)
    text = EventFormatter("text").format(record)
    assert re.fullmatch(TIMESTAMP + r" round: l1_relu round 1/3: compile_error", text), text
    payload = json.loads(EventFormatter("json").format(record))
    assert payload["event"] == "round" and payload["round"] == 1 and re.fullmatch(TIMESTAMP, payload["time"])
    warning = logging.LogRecord("kernelsage.models.retry", logging.WARNING, __file__, 1, "model call failed", None,
                                None)
    assert " warning: model call failed" in EventFormatter("text").format(warning)  # a plain warning is an event too


def test_lines_are_printed_off_a_terminal_or_when_asked_and_not_on_a_terminal(
        capsys: pytest.CaptureFixture[str]) -> None:
    event = episode_started(task_id="l1_add", level=1, episode_id="r/sage:1:l1_add", policy="sage", resumed=False)
    with event_lines(None, terminal=True):
        emit(event)
    assert capsys.readouterr().err == ""  # the live board speaks for the run there
    with event_lines(None, terminal=False):
        emit(event)
        logging.getLogger("kernelsage.models.retry").warning("model call failed (HTTP 500: boom)",
                                                             extra={"event": "model_retry", "fields": {"attempt": 1}})
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 2)[1] for line in lines] == ["episode_start:", "model_retry:"], lines
    with event_lines("json", terminal=True):
        emit(event)
    assert json.loads(capsys.readouterr().err)["episode_id"] == "r/sage:1:l1_add"
    emit(event)  # after the block nothing listens
    assert capsys.readouterr().err == ""


def _events(stderr: str, log_format: str) -> list[dict]:
    if log_format == "json":
        return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    found = [re.match(TIMESTAMP + r" (\w+): (.*)", line) for line in stderr.splitlines()]
    return [{"event": m.group(1), "message": m.group(2)} for m in found if m]


@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_run_off_a_terminal_says_each_event_as_it_happens(database_url: str, tmp_path: Path,
                                                            log_format: str) -> None:
    run_id, namespace = f"log-{uuid.uuid4().hex[:6]}", f"log-{uuid.uuid4().hex[:6]}"
    # The first call fails with a 500 and is retried: the retry is an event too.
    with serve([error(500, "the GPU fell over"), answer(candidate(example_source("l1_relu")))]) as server:
        env = {**_env(database_url, server.url, tmp_path), "KERNELSAGE_MODEL_ATTEMPTS": "2"}
        args = ["run", *_stream_args(run_id, namespace)] + (["--log-format", "json"] if log_format == "json" else [])
        result = _kernelsage(args, env, tmp_path)  # stderr is a pipe: no terminal
    assert result.returncode == 0, result.stderr[-3000:]
    events = _events(result.stderr, log_format)
    names = [e["event"] for e in events]
    assert names[0] == "run_start" and names[-1] == "episode_end", names
    assert names.index("episode_start") < names.index("model_retry") < names.index("round") < names.index("commit")
    retry = events[names.index("model_retry")]
    assert "HTTP 500: the GPU fell over" in retry["message"]
    verdict = events[names.index("round")]
    # The round's verdict as the judge gave it (this test is about the line, not the verdict: a profile on a
    # busy machine has been seen to call the honest kernel's time cached_result)
    said = re.search(r"l1_relu round 1/1: (\w+)", verdict["message"])
    assert said is not None and said.group(1) in ("ok", "cached_result"), verdict["message"]
    if log_format == "json":
        assert verdict["status"] == said.group(1) and verdict["operator"] == "l1_relu" and retry["attempt"] == 1
        assert events[-1]["solved"] is True and events[0]["run_id"] == run_id


def test_an_unknown_log_format_is_refused_before_anything_loads(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kernelsage", "run", "--model", "openai:m", "--log-format", "xml"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "--log-format 'xml': choose text or json" in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()

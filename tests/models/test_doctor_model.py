"""`kernelsage doctor` calls the configured model once, with a short timeout, unless --offline; the outcome
is one check. The endpoints are the local fake OpenAI server (a labelled test double) and a closed port."""

from __future__ import annotations

import importlib
import json
import socket
import time

import pytest
from typer.testing import CliRunner

from kernelsage.cli import app
from kernelsage.cli.doctor import check_model
from tests.models.openai_server import answer, error, hang, serve


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch):
    def configure(url: str) -> None:
        monkeypatch.setenv("KERNELSAGE_MODEL", "openai:test-model")
        monkeypatch.setenv("KERNELSAGE_MODEL_BASE_URL", url)
        monkeypatch.setenv("KERNELSAGE_MODEL_API_KEY", "sk-test")
    return configure


def test_a_listening_model_is_called_once_with_a_tiny_request(model_env) -> None:
    with serve([answer("ok")]) as server:
        model_env(server.url)
        check = check_model()
    assert check.status == "ok" and "answered in" in check.detail and "test-model" in check.detail
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["max_tokens"] == 16 and len(request["messages"]) == 1


def test_nothing_listening_fails_in_one_line_naming_the_url(model_env) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    model_env(url)
    check = check_model()
    assert check.status == "fail" and url in check.detail and "\n" not in check.detail
    assert "--offline" in check.fix


def test_a_hanging_model_is_bounded_by_the_timeout(model_env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSAGE_MODEL_TIMEOUT", "0.5")  # shorter than doctor's own limit: it wins
    with serve([hang(5)]) as server:
        model_env(server.url)
        started = time.perf_counter()
        check = check_model()
        elapsed = time.perf_counter() - started
    assert check.status == "fail" and "Timeout" in check.detail
    assert elapsed < 4.5  # returned before the server's 5 s hang ended (not a speed limit: 0.5 s is asked)
    assert len(server.requests) == 1  # one try: doctor does not retry


def test_a_rejected_key_is_the_checks_reason(model_env) -> None:
    with serve([error(401, "invalid api key")]) as server:
        model_env(server.url)
        check = check_model()
    assert check.status == "fail" and "rejected the API key (401)" in check.detail


def test_offline_sends_nothing_and_the_cli_reports_the_call(model_env, monkeypatch: pytest.MonkeyPatch) -> None:
    doctor_module = importlib.import_module("kernelsage.cli.doctor")  # the package exports the command by this name
    monkeypatch.setattr(doctor_module, "CHECKS", (check_model,))  # only the model: the other checks are slow
    runner = CliRunner()
    with serve([answer("ok")]) as server:
        model_env(server.url)
        offline = runner.invoke(app, ["doctor", "--offline", "--json"])
        assert len(server.requests) == 0
        online = runner.invoke(app, ["doctor", "--json"])
        assert len(server.requests) == 1
    assert offline.exit_code == 0 and "not called (--offline)" in json.loads(offline.stdout)[0]["detail"]
    assert online.exit_code == 0 and "answered in" in json.loads(online.stdout)[0]["detail"]
    with serve([error(500)]) as server:
        model_env(server.url)
        failed = runner.invoke(app, ["doctor", "--json"])
    assert failed.exit_code == 1 and json.loads(failed.stdout)[0]["status"] == "fail"

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
    monkeypatch.setenv("KERNELSAGE_MODEL_TIMEOUT", "0.5")  # doctor waits as long as a run would
    with serve([hang(5)]) as server:
        model_env(server.url)
        started = time.perf_counter()
        check = check_model()
        elapsed = time.perf_counter() - started
    assert check.status == "fail" and "Timeout" in check.detail
    assert elapsed < 4.5  # returned before the server's 5 s hang ended (not a speed limit: 0.5 s is asked)
    assert len(server.requests) == 1  # one try: doctor does not retry


def test_a_slow_but_working_model_is_reported_slow_not_failed(model_env, monkeypatch: pytest.MonkeyPatch) -> None:
    doctor_module = importlib.import_module("kernelsage.cli.doctor")
    monkeypatch.setattr(doctor_module, "SLOW_ANSWER_SECONDS", 0.3, raising=False)  # scaled down: 1 s is slow here
    monkeypatch.setenv("KERNELSAGE_MODEL_TIMEOUT", "10")
    with serve([hang(1.0)]) as server:  # answers, after a second
        model_env(server.url)
        check = check_model()
    assert check.status == "warn" and "answered, but slow" in check.detail and "\n" not in check.detail
    assert "KERNELSAGE_MODEL_TIMEOUT (now 10 s)" in check.fix
    assert len(server.requests) == 1


def test_doctor_waits_as_long_as_the_model_timeout(model_env, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelsage.models.factory as factory

    built: list[dict] = []
    real = factory.make_chat_model

    def spy(spec: str, **kwargs):
        built.append(kwargs)
        return real(spec, **kwargs)

    monkeypatch.setattr(factory, "make_chat_model", spy)
    monkeypatch.setenv("KERNELSAGE_MODEL_TIMEOUT", "40")  # a slow local server's setting, past any fixed cap
    with serve([answer("ok")]) as server:
        model_env(server.url)
        assert check_model().status == "ok"
    assert built[0]["timeout"] == 40


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

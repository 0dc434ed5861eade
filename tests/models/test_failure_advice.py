"""Advice that fits the failure: a server that answered with an error (5xx) is said to have failed, with its
status and the first line of its error, not sent to the timeouts; answers cut off at the output limit name
KERNELSAGE_MODEL_MAX_TOKENS. The endpoint is the local test double (tests.models.openai_server)."""

from __future__ import annotations

import logging

import pytest

from kernelsage.errors import ModelCallError
from kernelsage.evals.verdict import run_problem
from tests.cli.test_model_failures import _record
from tests.models.openai_server import error, garbage, serve
from tests.models.test_misbehaving_server import ask


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSAGE_MODEL_TIMEOUT", "2")
    monkeypatch.setenv("KERNELSAGE_MODEL_ATTEMPTS", "2")


def test_a_server_error_says_the_server_failed_with_its_status_and_first_line(limits, caplog) -> None:
    with serve([error(500, "CUDA out of memory on device 0\nTraceback (most recent call last): ...")]) as server, \
            caplog.at_level(logging.WARNING, logger="kernelsage.models.retry"), \
            pytest.raises(ModelCallError) as failure:
        ask(server.url)
    message = str(failure.value)
    assert "gave up after 2 attempts: the server failed with HTTP 500: CUDA out of memory on device 0;" in message
    assert server.url in message and "Traceback" not in message
    assert "TIMEOUT" not in message  # waiting longer does not mend a server that answers with an error
    [retry] = [r for r in caplog.records if getattr(r, "event", None) == "model_retry"]
    assert retry.fields["fault"] == "HTTP 500: CUDA out of memory on device 0" and retry.fields["attempt"] == 1


def test_a_body_that_is_no_json_keeps_its_own_advice(limits) -> None:
    with serve([garbage()]) as server, pytest.raises(ModelCallError) as failure:
        ask(server.url)
    assert "the server failed" not in str(failure.value) and server.url in str(failure.value)


def test_answers_cut_off_at_the_output_limit_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSAGE_MODEL_MAX_TOKENS", "512")
    cut = run_problem({"sage": [_record("l1_relu", "truncated", "truncated")]}, model="openai:m")
    assert cut is not None and "KERNELSAGE_MODEL_MAX_TOKENS=512" in cut and "raise KERNELSAGE_MODEL_MAX_TOKENS" in cut
    assert "format" not in cut
    garbled = run_problem({"sage": [_record("l1_relu", "parse_error")]}, model="openai:m")
    assert garbled is not None and "format the prompts ask for" in garbled and "MAX_TOKENS" not in garbled
    both = run_problem({"sage": [_record("l1_relu", "parse_error", "truncated")]}, model="openai:m")
    assert both is not None and "MAX_TOKENS" in both and "format" in both

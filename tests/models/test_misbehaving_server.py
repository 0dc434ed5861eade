"""Real ChatOpenAI, built by the real factory, against a local server that misbehaves on purpose: every
fault ends as one clear error (or a usable answer), in bounded time, with the endpoint named."""

from __future__ import annotations

import asyncio
import time

import pytest
import tenacity
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from kernelsage.errors import ContextOverflowError, ModelCallError, ModelError
from kernelsage.graph.nodes.model_calls import is_truncated
from kernelsage.models.factory import make_chat_model
from kernelsage.models.retry import ainvoke_with_retry, invoke_with_retry
from tests.models.openai_server import answer, cut_off, error, garbage, hang, overflow, serve


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch):
    def set_limits(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"KERNELSAGE_MODEL_{name.upper()}", str(value))
    set_limits(timeout=0.5, attempts=2, max_tokens=321, temperature=0.1)
    return set_limits


def ask(url: str, text: str = "hi", **kwargs):
    model = make_chat_model("openai:test-model", base_url=url, api_key="sk-test")
    return invoke_with_retry(model, [HumanMessage(text)], sleep=lambda seconds: None, **kwargs)


def test_every_request_carries_the_output_limit_and_temperature(limits) -> None:
    with serve([answer("hello")]) as server:
        assert ask(server.url).content == "hello"
    sent = server.requests[0]
    assert sent["max_tokens"] == 321 and "max_completion_tokens" not in sent  # what compatible servers read
    assert sent["temperature"] == pytest.approx(0.1)


def test_a_hanging_endpoint_is_bounded_by_the_timeout_and_retried(limits) -> None:
    with serve([hang(10)]) as server:
        started = time.monotonic()
        with pytest.raises(ModelCallError, match=r"gave up after 2 attempts: \w*TimeoutError") as caught:
            ask(server.url)
        assert time.monotonic() - started < 5
    assert len(server.requests) == 2 and server.url in str(caught.value)


def test_the_deadline_bounds_a_call_whatever_the_attempts(limits, monkeypatch: pytest.MonkeyPatch) -> None:
    # Waits of 1 s, then 2 s (skipped here; the deadline counts the time really spent, 0.5 s or more per
    # attempt): the first ends before the 3 s deadline, the second would not, so it is not begun. The jitter
    # is held at 0: with up to 1 s of it, a first attempt slower than 1 s on a busy machine could stop the
    # call before its second attempt.
    monkeypatch.setattr(tenacity.wait.random, "uniform", lambda low, high: low)
    limits(attempts=50, deadline=3)
    with serve([hang(10)]) as server:
        started = time.monotonic()
        with pytest.raises(ModelCallError, match="deadline passed after 3 s"):
            ask(server.url)
        assert time.monotonic() - started < 4 and len(server.requests) == 2


def test_one_attempt_waits_no_longer_than_what_is_left_of_the_deadline(limits) -> None:
    limits(timeout=30, attempts=4, deadline=1)  # a request timeout far past the deadline
    with serve([hang(10)]) as server:
        started = time.monotonic()
        with pytest.raises(ModelCallError, match=r"deadline passed after 1 s.*KERNELSAGE_MODEL_DEADLINE"):
            ask(server.url)
        assert time.monotonic() - started < 5  # not the server's 10 s hang (nor the 30 s timeout)
    assert len(server.requests) == 1


def test_the_async_call_shares_the_deadline_too(limits) -> None:
    limits(timeout=30, attempts=4, deadline=1)
    with serve([hang(10)]) as server:
        model = make_chat_model("openai:test-model", base_url=server.url, api_key="sk-test")
        started = time.monotonic()
        with pytest.raises(ModelCallError, match="deadline passed"):
            asyncio.run(ainvoke_with_retry(model, [HumanMessage("hi")]))
        assert time.monotonic() - started < 5


def test_5xx_is_retried_and_4xx_is_not(limits) -> None:
    with serve([error(500), answer("recovered")]) as server:
        assert ask(server.url).content == "recovered"
    assert len(server.requests) == 2
    with serve([error(503)]) as server, pytest.raises(ModelCallError, match="gave up after 2 attempts"):
        ask(server.url)
    with serve([error(401, "invalid api key")]) as server, \
            pytest.raises(ModelError, match=r"rejected the API key.*KERNELSAGE_MODEL_API_KEY") as caught:
        ask(server.url)
    assert len(server.requests) == 1 and not isinstance(caught.value, ModelCallError)  # the stream must stop
    with serve([error(422, "bad parameter")]) as server, pytest.raises(ModelCallError, match="422"):
        ask(server.url)
    assert len(server.requests) == 1


def test_a_garbage_body_and_a_dead_port_are_one_line_naming_the_url(limits) -> None:
    with serve([garbage()]) as server, pytest.raises(ModelCallError, match="not a chat completion") as caught:
        ask(server.url)
    assert server.url in str(caught.value) and "\n" not in str(caught.value)
    dead = server.url  # the server is gone: nothing listens there now
    with pytest.raises(ModelCallError, match=r"APIConnectionError|OpenAIConnectionError") as caught:
        ask(dead)
    assert dead in str(caught.value) and "\n" not in str(caught.value)


def test_a_cut_off_answer_is_recognised(limits) -> None:
    with serve([cut_off()]) as server:
        reply = ask(server.url)
    assert is_truncated(reply) and not is_truncated(AIMessage(content="x", response_metadata={"finish_reason": "stop"}))


def test_context_overflow_is_its_own_error(limits) -> None:
    with serve([overflow()]) as server, pytest.raises(ContextOverflowError, match="context window"):
        ask(server.url)
    assert len(server.requests) == 1


def test_tool_call_messages_go_out_with_empty_content_not_null(limits) -> None:
    history = [HumanMessage("diagnose"),
               AIMessage(content="", tool_calls=[{"name": "verify_kernel", "args": {}, "id": "call_1"}]),
               ToolMessage(content="ok", tool_call_id="call_1")]
    with serve([answer("the diagnosis")], reject_null_content=True) as server:
        model = make_chat_model("openai:test-model", base_url=server.url, api_key="sk-test")
        assert invoke_with_retry(model, history, sleep=lambda s: None).content == "the diagnosis"
    assert server.rejected == 0 and server.requests[0]["messages"][1]["content"] == ""


def test_invalid_limits_name_their_variable(limits) -> None:
    limits(timeout="soon")
    with pytest.raises(ModelError, match="KERNELSAGE_MODEL_TIMEOUT='soon' is not a number"):
        make_chat_model("openai:test-model", base_url="http://127.0.0.1:9/v1", api_key="sk-test")

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import httpx2
import openai
import pytest
from langchain_core.messages import AIMessage

from kernelsage.errors import ModelError
from kernelsage.models import ScriptedChatModel, ainvoke_with_retry, invoke_with_retry, is_transient

REQUEST = httpx2.Request("POST", "https://models.invalid/v1/chat/completions")


def status_error(
    cls: type[openai.APIStatusError], code: int, message: str = "refused"
) -> openai.APIStatusError:
    return cls(message, response=httpx2.Response(code, request=REQUEST), body=None)


TRANSIENT = [
    status_error(openai.RateLimitError, 429, "slow down"),
    status_error(openai.InternalServerError, 503, "overloaded"),
    openai.APITimeoutError(request=REQUEST),
    openai.APIConnectionError(request=REQUEST),
    httpx.ReadTimeout("read timed out"),
    httpx2.ConnectError("connection refused"),
    TimeoutError("timed out"),
    ConnectionResetError("reset by peer"),
]
PERMANENT = [
    (
        status_error(openai.AuthenticationError, 401),
        "rejected the API key \\(401\\).*KERNELSAGE_MODEL_API_KEY",
    ),
    (status_error(openai.PermissionDeniedError, 403), "denied access \\(403\\)"),
    (
        status_error(openai.BadRequestError, 400, "context too long"),
        "rejected the request \\(400\\).*context too long",
    ),
    (status_error(openai.NotFoundError, 404), "no such model or route \\(404\\).*KERNELSAGE_MODEL_BASE_URL"),
    (status_error(openai.UnprocessableEntityError, 422), "rejected the request \\(422\\)"),
]


class Flaky:
    """Raises the given errors on its first calls, then answers."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def invoke(self, messages: Any, config: Any = None) -> AIMessage:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return AIMessage(content=f"answer to {messages}")

    async def ainvoke(self, messages: Any, config: Any = None) -> AIMessage:
        return self.invoke(messages, config)


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_faults_are_retried_until_success(error: BaseException) -> None:
    waits: list[float] = []
    model = Flaky(error, error)

    answer = invoke_with_retry(model, "q", attempts=3, sleep=waits.append)

    assert answer.content == "answer to q"
    assert model.calls == 3
    assert len(waits) == 2
    assert is_transient(error)


def test_backoff_grows_and_is_capped_by_max_wait() -> None:
    waits: list[float] = []
    model = Flaky(*[TimeoutError()] * 7)

    invoke_with_retry(model, "q", attempts=8, max_wait=5.0, sleep=waits.append)

    assert 1.0 <= waits[0] <= 2.0 and 2.0 <= waits[1] <= 3.0  # initial 1 s, doubling, plus up to 1 s jitter
    assert all(wait <= 5.0 for wait in waits)
    assert waits[-1] == 5.0


def test_gives_up_after_the_last_attempt() -> None:
    rate_limit = status_error(openai.RateLimitError, 429, "slow down")
    model = Flaky(*[rate_limit] * 10)

    with pytest.raises(ModelError, match="gave up after 4 attempts: RateLimitError: slow down") as failure:
        invoke_with_retry(model, "q", attempts=4, sleep=lambda _: None)

    assert model.calls == 4
    assert failure.value.__cause__ is rate_limit


@pytest.mark.parametrize(("error", "message"), PERMANENT, ids=lambda p: str(getattr(p, "status_code", "")))
def test_auth_and_bad_requests_fail_at_once(error: openai.APIStatusError, message: str) -> None:
    model = Flaky(error)

    with pytest.raises(ModelError, match=message) as failure:
        invoke_with_retry(model, "q", sleep=lambda _: pytest.fail("must not wait"))

    assert model.calls == 1
    assert failure.value.__cause__ is error
    assert not is_transient(error)


def test_other_exceptions_pass_through_unretried() -> None:
    model = Flaky(ValueError("a bug, not a fault"))
    with pytest.raises(ValueError, match="a bug"):
        invoke_with_retry(model, "q", sleep=lambda _: pytest.fail("must not wait"))
    assert model.calls == 1


def test_retries_a_real_chat_model_call() -> None:
    def rate_limited(messages: Any) -> AIMessage:
        raise status_error(openai.RateLimitError, 429)

    model = ScriptedChatModel([rate_limited, "done"])

    assert invoke_with_retry(model, "q", sleep=lambda _: None).content == "done"
    assert len(model.requests) == 2


def test_async_twin_retries_and_gives_up() -> None:
    waits: list[float] = []

    async def record_wait(seconds: float) -> None:
        waits.append(seconds)

    recovered = Flaky(TimeoutError())
    answer = asyncio.run(ainvoke_with_retry(recovered, "q", sleep=record_wait))
    assert answer.content == "answer to q" and recovered.calls == 2 and len(waits) == 1

    hopeless = Flaky(*[TimeoutError()] * 5)
    with pytest.raises(ModelError, match="gave up after 2 attempts"):
        asyncio.run(ainvoke_with_retry(hopeless, "q", attempts=2, sleep=record_wait))
    assert hopeless.calls == 2

    denied = Flaky(status_error(openai.AuthenticationError, 401))
    with pytest.raises(ModelError, match="401"):
        asyncio.run(ainvoke_with_retry(denied, "q", sleep=record_wait))
    assert denied.calls == 1


def test_attempts_must_be_positive() -> None:
    with pytest.raises(ModelError, match="at least 1"):
        invoke_with_retry(Flaky(), "q", attempts=0)

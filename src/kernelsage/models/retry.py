"""Call a model with retries for transient API faults; everything else fails at once as `ModelError`."""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from kernelsage.errors import ModelError
from kernelsage.models.factory import MODEL_API_KEY_ENV, MODEL_BASE_URL_ENV

log = logging.getLogger(__name__)


def _transport_faults() -> tuple[type[BaseException], ...]:
    # openai >= 3 is built on `httpx2`; older stacks and other providers use `httpx`. Accept either.
    faults: list[type[BaseException]] = []
    for module_name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        faults += [module.TimeoutException, module.NetworkError]
    return tuple(faults)


TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    openai.RateLimitError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.InternalServerError,
    TimeoutError,
    ConnectionError,
    *_transport_faults(),
)


def is_transient(error: BaseException) -> bool:
    """Whether waiting and trying again may help: rate limits, timeouts (408), dropped connections, 5xx."""
    if isinstance(error, openai.APIStatusError):
        return error.status_code in (408, 429) or error.status_code >= 500
    return isinstance(error, TRANSIENT_ERRORS)


def permanent_error_message(error: BaseException) -> str | None:
    """What to tell the user about a fault that retrying cannot fix; None when it is not an API fault."""
    if not isinstance(error, openai.APIStatusError):
        return None
    code = error.status_code
    detail = str(error.message)[:300]
    if code == 401:
        return f"the model endpoint rejected the API key (401): check {MODEL_API_KEY_ENV} ({detail})"
    if code == 403:
        return f"the model endpoint denied access (403): check the key's permissions and quota ({detail})"
    if code == 404:
        return (
            f"the model endpoint has no such model or route (404): check the model name and "
            f"{MODEL_BASE_URL_ENV} ({detail})"
        )
    if code in (400, 422):
        return (
            f"the model endpoint rejected the request ({code}): check the model name, its parameters and "
            f"the prompt length ({detail})"
        )
    return f"the model endpoint refused the request ({code}): {detail}"


def invoke_with_retry(
    model: Any,
    messages: Any,
    *,
    attempts: int = 5,
    max_wait: float = 30.0,
    config: Any = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """`model.invoke(messages, config)`, retried on transient faults with exponential backoff and jitter.

    Authentication and bad-request errors raise `ModelError` at once; a transient fault still failing
    after `attempts` calls raises `ModelError` ("gave up after N attempts"). Other exceptions pass
    through unchanged. `sleep` is injectable so tests need not wait.
    """
    retrying = Retrying(sleep=sleep, **_policy(attempts, max_wait))
    try:
        return retrying(model.invoke, messages, config)
    except RetryError as exc:
        raise _gave_up(exc, attempts) from exc.last_attempt.exception()
    except openai.APIStatusError as exc:
        raise ModelError(permanent_error_message(exc)) from exc


async def ainvoke_with_retry(
    model: Any,
    messages: Any,
    *,
    attempts: int = 5,
    max_wait: float = 30.0,
    config: Any = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Any:
    """The async twin of `invoke_with_retry` (`model.ainvoke`)."""
    retrying = AsyncRetrying(sleep=sleep, **_policy(attempts, max_wait))
    try:
        return await retrying(model.ainvoke, messages, config)
    except RetryError as exc:
        raise _gave_up(exc, attempts) from exc.last_attempt.exception()
    except openai.APIStatusError as exc:
        raise ModelError(permanent_error_message(exc)) from exc


def _policy(attempts: int, max_wait: float) -> dict[str, Any]:
    if attempts < 1:
        raise ModelError(f"attempts must be at least 1, got {attempts}")
    return {
        "stop": stop_after_attempt(attempts),
        "wait": wait_exponential_jitter(multiplier=1.0, max=max_wait, jitter=1.0),
        "retry": retry_if_exception(is_transient),
        "before_sleep": _log_retry,
    }


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    log.warning("model call failed (%r), attempt %d; retrying in %.1f s", error, state.attempt_number, wait)


def _gave_up(exc: RetryError, attempts: int) -> ModelError:
    last = exc.last_attempt.exception()
    return ModelError(f"gave up after {attempts} attempts: {type(last).__name__}: {last}")

"""Call a model with retries for transient API faults; everything else fails at once as `ModelError`.

Which failure is which:
- timeouts, dropped connections, 408, 429 and 5xx are retried with exponential backoff and jitter, at most
  `attempts` tries within `deadline` seconds (`ModelLimits`); when they still fail, `ModelCallError`
  names the endpoint's URL. The deadline bounds the whole call: no wait runs past it, and an
  OpenAI-compatible model (`openai_compat`) cuts each attempt's request timeout to what is left of it;
- a request the endpoint rejects (400, 422) is `ModelCallError`, `ContextOverflowError` when the prompt
  exceeds the model's window: the episode records the round and goes on;
- authentication, permission and unknown-model answers (401, 403, 404) are plain `ModelError`: every
  later call would fail alike, so the stream stops with one line that says what to fix.
"""

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
    stop_before_delay,
    wait_exponential_jitter,
)

from kernelsage.errors import ContextOverflowError, ModelCallError, ModelError
from kernelsage.models.factory import MODEL_API_KEY_ENV, MODEL_BASE_URL_ENV
from kernelsage.models.limits import ModelLimits, call_deadline

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


# How servers word "the prompt is too long" (OpenAI, vLLM, llama.cpp, DeepSeek, Qwen, GLM, gateways).
_OVERFLOW_WORDS = ("context length", "context_length", "maximum context", "context window", "exceed_context",
                   "exceeds the available context", "too many tokens", "prompt is too long", "input is too long",
                   "reduce the length", "longer than the model")


def is_context_overflow(error: BaseException) -> bool:
    """A 400/413/422 whose message says the request does not fit the model's context window."""
    if not isinstance(error, openai.APIStatusError) or error.status_code not in (400, 413, 422):
        return False
    text = f"{error.message} {getattr(error, 'body', '')}".lower()
    return any(words in text for words in _OVERFLOW_WORDS)


def endpoint_of(error: BaseException) -> str:
    """The URL a failed request went to, when the error knows it."""
    try:
        request = getattr(error, "request", None)
        return str(request.url) if request is not None else ""
    except RuntimeError:  # httpx raises when an error was built without its request
        return ""


def as_model_error(error: openai.APIStatusError) -> ModelError:
    """A status error retrying cannot fix, as the error the caller acts on (see the module docstring)."""
    message = permanent_error_message(error) or str(error)
    if error.status_code in (401, 403, 404):
        return ModelError(message)
    if is_context_overflow(error):
        return ContextOverflowError(f"the prompt does not fit the model's context window: {message}")
    return ModelCallError(message)


def permanent_error_message(error: BaseException) -> str | None:
    """What to tell the user about a fault that retrying cannot fix; None when it is not an API fault."""
    if not isinstance(error, openai.APIStatusError):
        return None
    code = error.status_code
    detail = " ".join(str(error.message).split())[:300]
    url = endpoint_of(error)
    detail = f"{detail}; {url}" if url else detail
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
    attempts: int | None = None,
    deadline: float | None = None,
    max_wait: float = 30.0,
    config: Any = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """`model.invoke(messages, config)`, retried on transient faults with exponential backoff and jitter.

    `attempts` and `deadline` (seconds for the whole call) default to `ModelLimits.from_env()`. A fault
    retrying cannot fix, or a transient one still failing at the limit, raises `ModelError` or one of its
    subclasses (see the module docstring). Other exceptions pass through unchanged. `sleep` is injectable
    so tests need not wait.
    """
    attempts, deadline = _limits(attempts, deadline)
    retrying = Retrying(sleep=sleep, **_policy(attempts, max_wait, deadline))
    try:
        with call_deadline(deadline):
            return retrying(model.invoke, messages, config)
    except RetryError as exc:
        raise _gave_up(exc, attempts, deadline) from exc.last_attempt.exception()
    except openai.APIStatusError as exc:
        raise as_model_error(exc) from exc


async def ainvoke_with_retry(
    model: Any,
    messages: Any,
    *,
    attempts: int | None = None,
    deadline: float | None = None,
    max_wait: float = 30.0,
    config: Any = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Any:
    """The async twin of `invoke_with_retry` (`model.ainvoke`)."""
    attempts, deadline = _limits(attempts, deadline)
    retrying = AsyncRetrying(sleep=sleep, **_policy(attempts, max_wait, deadline))
    try:
        with call_deadline(deadline):
            return await retrying(model.ainvoke, messages, config)
    except RetryError as exc:
        raise _gave_up(exc, attempts, deadline) from exc.last_attempt.exception()
    except openai.APIStatusError as exc:
        raise as_model_error(exc) from exc


def _limits(attempts: int | None, deadline: float | None) -> tuple[int, float]:
    if attempts is None or deadline is None:
        limits = ModelLimits.from_env()
        attempts = limits.attempts if attempts is None else attempts
        deadline = limits.deadline if deadline is None else deadline
    return attempts, deadline


def _policy(attempts: int, max_wait: float, deadline: float) -> dict[str, Any]:
    if attempts < 1:
        raise ModelError(f"attempts must be at least 1, got {attempts}")
    return {
        # stop_before_delay: no wait ends past the deadline (a wait that would is not begun).
        "stop": stop_after_attempt(attempts) | stop_before_delay(deadline),
        "wait": wait_exponential_jitter(multiplier=1.0, max=max_wait, jitter=1.0),
        "retry": retry_if_exception(is_transient),
        "before_sleep": _log_retry,
    }


def fault_words(error: BaseException) -> str:
    """A failed call's fault in a few words: "HTTP 500: <the first line of the server's error>" for a status
    error, else the exception's type and first line."""
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}: {server_error_text(error)}"
    return f"{type(error).__name__}: {_first_line(str(error)) or 'no message'}"


def server_error_text(error: openai.APIStatusError) -> str:
    """The first line of what the server said: its JSON error's message when it sent one, else its body."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else inner
    elif body:
        text = body
    else:
        response = getattr(error, "response", None)
        try:
            text = response.text if response is not None else error.message
        except Exception:  # a streamed or closed response has no text to give
            text = error.message
    return _first_line(str(text or "")) or "no message"


def _first_line(text: str, limit: int = 200) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _log_retry(state: RetryCallState) -> None:
    """Say each retry (`kernelsage run` prints it as a `model_retry` event where no live board is drawn)."""
    error = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    words = fault_words(error) if error is not None else "no outcome"
    url = endpoint_of(error) if error is not None else ""
    log.warning("model call failed (%s), attempt %d; retrying in %.1f s", words, state.attempt_number, wait,
                extra={"event": "model_retry", "fields": {"attempt": state.attempt_number, "wait_s": round(wait, 2),
                                                          "fault": words, "endpoint": url}})


def _gave_up(exc: RetryError, attempts: int, deadline: float) -> ModelError:
    """The error of a call whose retries ran out, with the advice that fits its last fault: a server that
    answered with an error (5xx) is not a timeout, and a rate limit asks for fewer calls."""
    last = exc.last_attempt.exception()
    tries = exc.last_attempt.attempt_number
    url = endpoint_of(last) if last is not None else ""
    where = f"model endpoint {url}: " if url else ""
    limit = "" if tries >= attempts else f" (the call's deadline passed after {deadline:g} s)"
    plural = "s" if tries != 1 else ""
    gave_up = f"{where}gave up after {tries} attempt{plural}{limit}"
    if isinstance(last, openai.APIStatusError) and last.status_code >= 500:
        return ModelCallError(f"{gave_up}: the server failed with HTTP {last.status_code}: {server_error_text(last)}; "
                              "the fault is on the server's side: check its log or status, then rerun")
    detail = " ".join(str(last).split())[:300] or "no message"
    if isinstance(last, openai.APIStatusError) and last.status_code == 429:
        advice = ("the endpoint's rate limit: make fewer calls at once (--max-model-calls with --ray), or raise "
                  "KERNELSAGE_MODEL_DEADLINE / KERNELSAGE_MODEL_ATTEMPTS to wait longer")
    else:
        advice = ("check that the server is up, or raise KERNELSAGE_MODEL_TIMEOUT / KERNELSAGE_MODEL_DEADLINE / "
                  "KERNELSAGE_MODEL_ATTEMPTS")
    return ModelCallError(f"{gave_up}: {type(last).__name__}: {detail}; {advice}")

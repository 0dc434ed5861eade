"""ChatOpenAI as OpenAI-compatible servers (llama.cpp, vLLM, gateways) accept it, with clear failures.

- An assistant message that carries tool calls is sent with `content: ""`, not `null`: llama.cpp's server
  rejects null content (HTTP 500), and every server accepts the empty string.
- Off api.openai.com the output limit goes out as `max_tokens` (what every compatible server reads);
  OpenAI itself gets `max_completion_tokens`.
- Each request waits at most what is left of the call's deadline (`limits.seconds_left`), when that is
  shorter than the request timeout: retries share one deadline (`KERNELSAGE_MODEL_DEADLINE`).
- A body that is not a chat completion (an HTML error page, broken JSON) becomes one `ModelCallError`
  line naming the endpoint, instead of a parser's traceback.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from kernelsage.errors import ModelCallError
from kernelsage.models.limits import seconds_left

MIN_REQUEST_SECONDS = 0.01  # an attempt started at the deadline still gets a (failing) request, not an error


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI with the request and error handling described in the module docstring."""

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages", []):
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        if not _is_openai_host(self.openai_api_base) and "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        bound = self._attempt_timeout()
        if bound is not None:
            payload["timeout"] = bound  # the client's per-request option, not a field of the request body
        return payload

    def _attempt_timeout(self) -> float | None:
        """The call's remaining time when it is shorter than the model's request timeout (None: no bound)."""
        left = seconds_left()
        if left is None:
            return None
        own = self.request_timeout
        if isinstance(own, int | float) and own <= left:
            return None
        return max(left, MIN_REQUEST_SECONDS)

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(*args, **kwargs)
        except ValueError as exc:  # json.JSONDecodeError too: a body that is no chat completion
            raise self._garbage(exc) from exc

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return await super()._agenerate(*args, **kwargs)
        except ValueError as exc:
            raise self._garbage(exc) from exc

    def _garbage(self, exc: ValueError) -> ModelCallError:
        where = self.openai_api_base or "https://api.openai.com/v1"
        detail = " ".join(str(exc).split())[:200]
        return ModelCallError(f"the model endpoint {where} answered with something that is not a chat "
                              f"completion ({type(exc).__name__}: {detail}): check {where} serves the OpenAI API")


def _is_openai_host(base_url: str | None) -> bool:
    return not base_url or urlparse(base_url).hostname == "api.openai.com"


"""A scripted chat model: a test and demo double that answers from a list, never a real model."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

from kernelsage.errors import ModelError

ScriptedResponse = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


class ScriptedChatModel(BaseChatModel):
    """TEST/DEMO DOUBLE: returns scripted responses in order; never use it to produce real results.

    Each response is an `AIMessage`, a string (becomes an `AIMessage`), or a callable that receives the
    request's messages and returns either, so a test can answer from the prompt (e.g. echo the memory ids
    it was shown). Every request is kept in `.requests` for assertions.

    It exists because langchain_core's fakes (`GenericFakeChatModel`, `FakeMessagesListChatModel`) do not
    implement `bind_tools`, which the diagnostician node needs: here `bind_tools` records the bound tool
    names in `.bound_tool_names` and returns the same model, so requests and the script stay shared.
    Tool calls without an id get a deterministic one (`call_<response>_<index>`).
    """

    responses: list[Any]
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tool_names: list[str] = Field(default_factory=list)
    _next: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, responses: Sequence[ScriptedResponse], **kwargs: Any) -> None:
        super().__init__(responses=list(responses), **kwargs)

    @property
    def _llm_type(self) -> str:
        return "scripted-test-double"

    @property
    def display_name(self) -> str:
        return "scripted-test-double"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any):
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = params["ls_model_name"] = "scripted-test-double"
        return params

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been served yet."""
        return len(self.responses) - self._next

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any):
        self.bound_tool_names = [convert_to_openai_tool(tool)["function"]["name"] for tool in tools]
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        with self._lock:  # LangGraph may run nodes on several threads
            position = self._next
            self.requests.append(list(messages))
            if position >= len(self.responses):
                raise ModelError(
                    f"the scripted test model ran out of responses after {len(self.responses)} "
                    f"(request {position + 1} was not scripted): add responses to the script"
                )
            self._next += 1
        scripted = self.responses[position]
        answer = scripted(list(messages)) if callable(scripted) else scripted
        return ChatResult(generations=[ChatGeneration(message=_as_ai_message(answer, position))])


def _as_ai_message(answer: AIMessage | str, position: int) -> AIMessage:
    if isinstance(answer, str):
        return AIMessage(content=answer)
    if not isinstance(answer, AIMessage):
        raise ModelError(
            f"scripted response {position + 1} is a {type(answer).__name__}: script AIMessage or str values"
        )
    # A copy, so a test that inspects or mutates the answer never changes the script.
    tool_calls = [
        {**call, "id": call.get("id") or f"call_{position}_{index}"}
        for index, call in enumerate(answer.tool_calls)
    ]
    return answer.model_copy(update={"tool_calls": tool_calls}, deep=True)

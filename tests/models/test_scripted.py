from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from kernelsage.errors import ModelError
from kernelsage.models import ScriptedChatModel, model_name


@tool
def read_log(attempt: int) -> str:
    """Read the compiler log of an attempt."""
    return f"log {attempt}"


def test_serves_responses_in_order_and_keeps_requests() -> None:
    model = ScriptedChatModel(["first", AIMessage(content="second")])

    assert model.invoke("hello").content == "first"
    assert model.invoke([SystemMessage("sys"), HumanMessage("again")]).content == "second"
    assert [[m.content for m in request] for request in model.requests] == [["hello"], ["sys", "again"]]
    assert model.remaining == 0


def test_callable_answers_from_the_prompt() -> None:
    def echo_ids(messages: list[BaseMessage]) -> str:
        return f"saw: {messages[-1].content}"

    model = ScriptedChatModel([echo_ids])
    assert model.invoke("items 3, 7").content == "saw: items 3, 7"


def test_exhausted_script_raises_model_error() -> None:
    model = ScriptedChatModel(["only"])
    model.invoke("one")
    with pytest.raises(ModelError, match="ran out of responses after 1"):
        model.invoke("two")


def test_bind_tools_returns_the_same_model_and_records_tool_names() -> None:
    model = ScriptedChatModel(
        [AIMessage(content="", tool_calls=[{"name": "read_log", "args": {"attempt": 2}, "id": None}])]
    )

    bound = model.bind_tools([read_log])
    answer = bound.invoke("why did it fail?")

    assert bound is model
    assert model.bound_tool_names == ["read_log"]
    assert answer.tool_calls == [
        {"name": "read_log", "args": {"attempt": 2}, "id": "call_0_0", "type": "tool_call"}
    ]


def test_scripted_answers_are_copies() -> None:
    scripted = AIMessage(content="x")
    model = ScriptedChatModel([scripted, scripted])
    model.invoke("a").content = "changed"
    assert model.invoke("b").content == "x"


def test_is_labelled_as_a_test_double() -> None:
    model = ScriptedChatModel([])
    assert model._llm_type == "scripted-test-double"
    assert model_name(model) == "scripted-test-double"
    assert "TEST/DEMO DOUBLE" in (ScriptedChatModel.__doc__ or "")


def test_rejects_responses_of_the_wrong_type() -> None:
    model = ScriptedChatModel([lambda messages: 42])
    with pytest.raises(ModelError, match="is a int"):
        model.invoke("x")

"""Conversations go out with alternating turns, as strict chat templates require."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from kernelsage.models.turns import alternating
from tests.models.openai_server import roles_alternate


def roles(messages) -> list[dict]:
    return [{"role": {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}[m.type],
             "tool_calls": getattr(m, "tool_calls", None)} for m in messages]


def test_consecutive_user_turns_become_one_in_order() -> None:
    sent = [SystemMessage("rules"), HumanMessage("the task"), HumanMessage("answer shorter")]
    assert not roles_alternate(roles(sent))  # what a strict template rejects
    merged = alternating(sent)
    assert roles_alternate(roles(merged)) and [m.type for m in merged] == ["system", "human"]
    assert merged[1].content == "the task\n\nanswer shorter"
    assert sent[1].content == "the task"  # the caller's messages are not changed


def test_tool_turns_and_alternating_conversations_are_kept_as_they_are() -> None:
    calls = AIMessage(content="", tool_calls=[{"name": "a", "args": {}, "id": "1"}, {"name": "b", "args": {}, "id": "2"}])
    sent = [SystemMessage("rules"), HumanMessage("task"), calls, ToolMessage("out a", tool_call_id="1"),
            ToolMessage("out b", tool_call_id="2"), AIMessage("diagnosis"), HumanMessage("again")]
    assert alternating(sent) == sent and roles_alternate(roles(sent))

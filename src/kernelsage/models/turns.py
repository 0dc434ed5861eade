"""Conversations as strict chat templates accept them: after an optional leading system message, user and
assistant turns alternate.

The chat templates of Mistral and Llama-2 style models (served by vLLM or llama.cpp) reject anything else
with 400 "Conversation roles must alternate user/assistant/user/assistant/...", which would turn every
re-ask into a failed call. Tool results, and the assistant turns that request them, are outside that rule:
the templates that support tools skip them when they check the order.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

TURN_SEPARATOR = "\n\n"


def alternating(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with every run of consecutive user turns, or of plain assistant turns, merged into one
    turn (texts joined by a blank line, in order); everything else is kept as it is."""
    merged: list[BaseMessage] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if previous is not None and _mergeable(previous, message):
            merged[-1] = previous.model_copy(update={"content": _joined(previous.content, message.content)})
        else:
            merged.append(message)
    return merged


def _mergeable(previous: BaseMessage, message: BaseMessage) -> bool:
    if isinstance(previous, HumanMessage) and isinstance(message, HumanMessage):
        return True
    return (isinstance(previous, AIMessage) and isinstance(message, AIMessage)
            and not previous.tool_calls and not message.tool_calls)


def _joined(first: str | list, second: str | list) -> str | list:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}{TURN_SEPARATOR}{second}"
    # Content given as parts (text blocks, images): keep every part, in order.
    as_parts = [first] if isinstance(first, str) else list(first)
    return [*as_parts, TURN_SEPARATOR, *([second] if isinstance(second, str) else second)]

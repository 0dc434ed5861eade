"""Chat models: built from "provider:model" strings, called with retries, recorded and replayed.

The public names below are imported on first use (PEP 562), so a light module (`kernelsage.models.limits`,
whose advice reports quote) loads without LangChain or an HTTP client.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "RecordingChatModel": "cassette", "ReplayChatModel": "cassette", "request_key": "cassette",
    "make_chat_model": "factory", "model_name": "factory",
    "ainvoke_with_retry": "retry", "invoke_with_retry": "retry", "is_transient": "retry",
    "ScriptedChatModel": "scripted",
}
__all__ = [  # the keys of _WHERE, spelt out for linters and type checkers
    "RecordingChatModel",
    "ReplayChatModel",
    "ScriptedChatModel",
    "ainvoke_with_retry",
    "invoke_with_retry",
    "is_transient",
    "make_chat_model",
    "model_name",
    "request_key",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

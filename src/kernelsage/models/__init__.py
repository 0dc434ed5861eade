"""Chat models: built from "provider:model" strings, called with retries, recorded and replayed.

The public names below are imported on first use (PEP 562), so a light module (`kernelsage.models.limits`,
whose advice reports quote) loads without LangChain or an HTTP client.
"""

from __future__ import annotations

from kernelsage.lazy_exports import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)

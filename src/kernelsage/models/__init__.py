"""Chat models: built from "provider:model" strings, called with retries, recorded and replayed."""

from __future__ import annotations

from kernelsage.models.cassette import RecordingChatModel, ReplayChatModel, request_key
from kernelsage.models.factory import make_chat_model, model_name
from kernelsage.models.retry import ainvoke_with_retry, invoke_with_retry, is_transient
from kernelsage.models.scripted import ScriptedChatModel

__all__ = [
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

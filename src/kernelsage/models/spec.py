"""A chat model from one setting string: "provider:model", or "replay:<cassette>" to serve a recording."""

from __future__ import annotations

from pathlib import Path

from langchain_core.language_models import BaseChatModel


def model_from_spec(spec: str) -> BaseChatModel:
    """A chat model from "provider:model"; "replay:<path>" serves a recorded cassette, and only when asked."""
    if spec.startswith("replay:"):
        from kernelsage.models.cassette import ReplayChatModel

        return ReplayChatModel(path=Path(spec.removeprefix("replay:")))
    from kernelsage.models.factory import make_chat_model

    return make_chat_model(spec)

from __future__ import annotations

import importlib.util

import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from kernelsage.errors import ModelError
from kernelsage.models import RecordingChatModel, ScriptedChatModel, make_chat_model, model_name

ENV = [
    "KERNELSAGE_MODEL_BASE_URL",
    "KERNELSAGE_MODEL_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "VLLM_BASE_URL",
    "VLLM_API_KEY",
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@tool
def read_log(attempt: int) -> str:
    """Read the compiler log of an attempt."""
    return str(attempt)


def key_of(model: ChatOpenAI) -> str:
    return model.openai_api_key.get_secret_value()


def test_openai_model_from_explicit_settings() -> None:
    model = make_chat_model(
        "openai:glm-4.6", base_url="https://gateway.example/v1", api_key="sk-explicit", temperature=0.2
    )

    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.openai_api_base, key_of(model)) == (
        "glm-4.6",
        "https://gateway.example/v1",
        "sk-explicit",
    )
    assert model.temperature == 0.2
    assert model.max_retries == 0  # invoke_with_retry is the one retry layer
    assert model_name(model) == "openai:glm-4.6@gateway.example"


def test_kernelsage_variables_win_over_openai_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://openai.example/v1")
    assert key_of(make_chat_model("openai:gpt-4o-mini")) == "sk-openai"

    monkeypatch.setenv("KERNELSAGE_MODEL_API_KEY", "sk-kernelsage")
    monkeypatch.setenv("KERNELSAGE_MODEL_BASE_URL", "http://localhost:8000/v1")
    model = make_chat_model("openai:qwen2.5-coder")
    assert (key_of(model), model.openai_api_base) == ("sk-kernelsage", "http://localhost:8000/v1")


def test_missing_key_names_the_variables_to_set() -> None:
    with pytest.raises(ModelError, match=r"KERNELSAGE_MODEL_API_KEY.*OPENAI_API_KEY"):
        make_chat_model("openai:gpt-4o-mini")
    with pytest.raises(ModelError, match="DEEPSEEK_API_KEY"):
        make_chat_model("deepseek:deepseek-chat")


def test_deepseek_uses_its_own_endpoint_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leak")

    model = make_chat_model("deepseek:deepseek-chat")

    assert key_of(model) == "sk-deepseek"
    assert model_name(model) == "openai:deepseek-chat@api.deepseek.com"


def test_vllm_needs_a_url_but_no_key() -> None:
    with pytest.raises(ModelError, match="KERNELSAGE_MODEL_BASE_URL"):
        make_chat_model("vllm:Qwen2.5-Coder-7B")
    model = make_chat_model("vllm:Qwen2.5-Coder-7B", base_url="http://localhost:8000/v1")
    assert model.openai_api_base == "http://localhost:8000/v1"


@pytest.mark.parametrize("spec", ["gpt-4o-mini", "openai:", ":gpt-4o"])
def test_malformed_spec(spec: str) -> None:
    with pytest.raises(ModelError, match="provider:model"):
        make_chat_model(spec, api_key="k")


@pytest.mark.skipif(importlib.util.find_spec("langchain") is not None, reason="langchain installed")
def test_unknown_provider_without_langchain_says_what_to_use() -> None:
    with pytest.raises(ModelError, match=r"unknown model provider 'anthropic'.*'openai:<model>'"):
        make_chat_model("anthropic:claude", api_key="k")


def test_model_name_sees_through_tool_binding_and_recording(tmp_path) -> None:
    model = make_chat_model("openai:gpt-4o-mini", api_key="k")

    assert model_name(model) == "openai:gpt-4o-mini"
    assert model_name(model.bind_tools([read_log])) == "openai:gpt-4o-mini"
    recorder = RecordingChatModel(model, tmp_path / "c.jsonl")
    assert model_name(recorder) == "record:openai:gpt-4o-mini"
    # The recorder's traced run reports the real model behind it.
    assert recorder._get_ls_params()["ls_model_name"] == "gpt-4o-mini"
    assert model_name(ScriptedChatModel([])) == "scripted-test-double"


def test_recording_a_real_model_keeps_its_tool_binding(tmp_path) -> None:
    model = make_chat_model("openai:gpt-4o-mini", api_key="k")

    recorder = RecordingChatModel(model, tmp_path / "c.jsonl").bind_tools([read_log], tool_choice="any")

    assert recorder.inner is model
    assert recorder.bound_kwargs["tools"][0]["function"]["name"] == "read_log"
    assert recorder.bound_kwargs["tool_choice"] == "required"  # what ChatOpenAI sends for "any"
    assert [schema.get("function", {}).get("name") for schema in recorder.tools] == ["read_log", None]

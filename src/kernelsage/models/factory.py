"""Build chat models from "provider:model" strings, and name them for traces.

OpenAI and OpenAI-compatible providers (DeepSeek, Qwen on DashScope, GLM on Zhipu, vLLM, or any gateway
given a base URL) are built as `langchain_openai.ChatOpenAI` directly: the `langchain` package, whose
`init_chat_model` would do the same for "openai", is not a dependency, and these providers need no
package beyond `langchain-openai`. Any other provider ("anthropic:...", "ollama:...") goes through
`langchain.chat_models.init_chat_model` when `langchain` and the provider's package are installed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableBinding

from kernelsage.errors import ModelError
from kernelsage.models.limits import ModelLimits

MODEL_BASE_URL_ENV = "KERNELSAGE_MODEL_BASE_URL"
MODEL_API_KEY_ENV = "KERNELSAGE_MODEL_API_KEY"


@dataclass(frozen=True)
class _CompatibleProvider:
    base_url: str | None  # None: the caller must give one (or the OpenAI default applies)
    key_env: str  # the provider's own key variable, read after KERNELSAGE_MODEL_API_KEY
    base_url_env: str | None = None
    key_required: bool = True


_OPENAI_COMPATIBLE = {
    "openai": _CompatibleProvider(None, "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "deepseek": _CompatibleProvider("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "qwen": _CompatibleProvider("https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    "zhipu": _CompatibleProvider("https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI_API_KEY"),
    # A local vLLM server usually accepts any key; the OpenAI client still wants one.
    "vllm": _CompatibleProvider(None, "VLLM_API_KEY", "VLLM_BASE_URL", key_required=False),
}


def make_chat_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float | None = None,
    **kwargs: Any,
) -> BaseChatModel:
    """A chat model for `spec` ("provider:model", e.g. "openai:gpt-4o-mini", "deepseek:deepseek-chat").

    Base URL and key default to KERNELSAGE_MODEL_BASE_URL / KERNELSAGE_MODEL_API_KEY, then the provider's
    own variables (OPENAI_BASE_URL / OPENAI_API_KEY for "openai"). The client's own retries are off
    (`max_retries=0`) unless given, because `invoke_with_retry` is the one retry layer. The request
    timeout, the output limit (`max_tokens`, always sent) and the temperature come from the environment
    (`ModelLimits.from_env`) unless given. Never returns a fake model: a missing key or unknown provider
    raises `ModelError`.
    """
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not provider or not model:
        raise ModelError(f"model {spec!r} is not 'provider:model': write e.g. 'openai:gpt-4o-mini'")
    limits = ModelLimits.from_env()
    temperature = temperature if temperature is not None else limits.temperature
    if temperature is not None:
        kwargs["temperature"] = temperature
    kwargs.setdefault("timeout", limits.timeout)
    kwargs.setdefault("max_tokens", limits.max_tokens)
    compatible = _OPENAI_COMPATIBLE.get(provider)
    if compatible is not None:
        return _make_openai_compatible(provider, model, compatible, base_url, api_key, kwargs)
    return _make_with_init_chat_model(spec, provider, model, base_url, api_key, kwargs)


def _make_openai_compatible(
    provider: str,
    model: str,
    compatible: _CompatibleProvider,
    base_url: str | None,
    api_key: str | None,
    kwargs: dict[str, Any],
) -> BaseChatModel:
    from kernelsage.models.openai_compat import CompatibleChatOpenAI

    base_url = (
        base_url
        or os.environ.get(MODEL_BASE_URL_ENV)
        or (os.environ.get(compatible.base_url_env) if compatible.base_url_env else None)
        or compatible.base_url
    )
    api_key = api_key or os.environ.get(MODEL_API_KEY_ENV) or os.environ.get(compatible.key_env)
    if not api_key:
        if compatible.key_required:
            raise ModelError(
                f"model '{provider}:{model}' needs an API key: set {MODEL_API_KEY_ENV} (or {compatible.key_env})"
            )
        api_key = "EMPTY"
    if provider == "vllm" and not base_url:
        raise ModelError(
            f"model 'vllm:{model}' needs the server's URL: set {MODEL_BASE_URL_ENV} (e.g. http://localhost:8000/v1)"
        )
    kwargs.setdefault("max_retries", 0)
    return CompatibleChatOpenAI(model=model, base_url=base_url, api_key=api_key, **kwargs)


def _make_with_init_chat_model(
    spec: str,
    provider: str,
    model: str,
    base_url: str | None,
    api_key: str | None,
    kwargs: dict[str, Any],
) -> BaseChatModel:
    known = ", ".join(sorted(_OPENAI_COMPATIBLE))
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ModelError(
            f"unknown model provider {provider!r} in {spec!r}: use one of {known}, or 'openai:<model>' with "
            f"{MODEL_BASE_URL_ENV} for any OpenAI-compatible endpoint (other providers need "
            f"`pip install langchain` and the provider's package)"
        ) from exc
    # Only settings the user gave are passed: the provider's package reads its own variables otherwise.
    base_url = base_url or os.environ.get(MODEL_BASE_URL_ENV)
    api_key = api_key or os.environ.get(MODEL_API_KEY_ENV)
    if base_url:
        kwargs["base_url"] = base_url
    if api_key:
        kwargs["api_key"] = api_key
    try:
        return init_chat_model(model, model_provider=provider, **kwargs)
    except (ImportError, ValueError) as exc:
        raise ModelError(
            f"cannot build model {spec!r}: {exc}. Use one of {known}, or 'openai:<model>' with {MODEL_BASE_URL_ENV}"
        ) from exc


def model_name(model: Runnable) -> str:
    """A stable display name for tracing metadata, e.g. "openai:gpt-4o-mini@api.deepseek.com"."""
    while isinstance(model, RunnableBinding):  # bind_tools / bind wrap the model
        model = model.bound
    display_name = getattr(model, "display_name", None)
    if isinstance(display_name, str):
        return display_name
    if not isinstance(model, BaseChatModel):
        return type(model).__name__
    provider = model._get_ls_params().get("ls_provider") or model._llm_type
    named = getattr(model, "model_name", None) or getattr(model, "model", None)
    name = f"{provider}:{named}" if named else provider
    base_url = getattr(model, "openai_api_base", None)
    host = urlparse(base_url).hostname if base_url else None
    return f"{name}@{host}" if host and host != "api.openai.com" else name

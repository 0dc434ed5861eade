"""The graph that `langgraph.json` serves (LangGraph Server, `langgraph dev`).

Resources come from the environment, once per process: KERNELSAGE_MODEL ("provider:model", or
"replay:<cassette>" to serve recorded answers, which is then said in every run's metadata),
KERNELSAGE_BACKEND (cpu), KERNELSAGE_SUITE (builtin or a path), DATABASE_URL (else the embedded
server), KERNELSAGE_EMBEDDINGS. The namespace and the memory policy are per run, in the context.
"""

from __future__ import annotations

import asyncio
import os
import threading
from functools import cache, partial

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from kernelsage.errors import ConfigurationError
from kernelsage.graph.builder import build_graph
from kernelsage.models.spec import model_from_spec

_BUILD_LOCK = threading.Lock()  # concurrent first runs build the resources once


def _compiled() -> CompiledStateGraph:
    with _BUILD_LOCK:
        return _build()


@cache
def _build() -> CompiledStateGraph:
    from kernelsage.memory_backend.embeddings import make_embeddings
    from kernelsage.memory_backend.store import MemoryStore
    from kernelsage.tasks.loaders import find_task, load_suite
    from kernelsage.tools.backend import get_backend

    spec = os.environ.get("KERNELSAGE_MODEL")
    if not spec:
        raise ConfigurationError("set KERNELSAGE_MODEL to a chat model, e.g. openai:gpt-4o-mini "
                                 "(with KERNELSAGE_MODEL_API_KEY) or replay:<cassette.jsonl>")
    suite = load_suite(os.environ.get("KERNELSAGE_SUITE", "builtin"))
    graph = build_graph(
        models=model_from_spec(spec),
        backend=get_backend(os.environ.get("KERNELSAGE_BACKEND", "cpu")),
        tasks=partial(find_task, suite),
        memory_store=MemoryStore.connect(),
        embeddings=make_embeddings(),
    )
    return graph.compile(name="kernelsage-episode")


async def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory for LangGraph Server; resources are built on the first run and then reused.

    Building them reads the suite, starts or connects the database and loads the embedding model: that
    blocking work runs in a worker thread, never on the server's event loop (no `--allow-blocking`).
    """
    return await asyncio.to_thread(_compiled)

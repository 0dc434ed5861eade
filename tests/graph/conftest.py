"""Fixtures for the graph tests: the real CPU backend and built-in suite, memory with test embeddings."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from kernelsage.graph import AgentModels, Context, build_graph
from kernelsage.graph.runner import run_episode
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import LoadReport, find_task
from kernelsage.tools.backend import KernelBackend
from tests.graph.fakes import fake_embeddings


@pytest.fixture
def episode(store: MemoryStore, cpu_backend: KernelBackend, suite: LoadReport, namespace: str):
    """Run one episode of `task_id` with a scripted model; returns (final state, model)."""

    def run(responses: list[Any], *, task_id: str = "l1_relu", policy: str = "sage", budget: int = 3,
            checkpointer: Any = None, **context: Any) -> tuple[dict[str, Any], ScriptedChatModel]:
        model = ScriptedChatModel(responses)
        graph = build_graph(models=AgentModels(generator=model), backend=cpu_backend,
                            tasks=partial(find_task, suite), memory_store=store, embeddings=fake_embeddings())
        compiled = graph.compile(checkpointer=checkpointer)
        settings = Context(namespace=namespace, policy=policy, budget=budget, **context)
        state = run_episode(compiled, task_id=task_id, level=1, context=settings, backend="cpu",
                            model="scripted-test-double", episode_id=f"{namespace}-{task_id}")
        return state, model

    return run

"""Fixtures for the graph tests: the real CPU backend and built-in suite, memory with test embeddings."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from kernelsage.evals.loaders import LoadReport, find_task, load_suite
from kernelsage.graph import AgentModels, Context, build_graph
from kernelsage.graph.runner import run_episode
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tools.backend import KernelBackend, get_backend
from tests.graph.fakes import fake_embeddings


@pytest.fixture(scope="session")
def cpu_backend() -> Iterator[KernelBackend]:
    backend = get_backend("cpu", trials=2, reps=20)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def suite() -> LoadReport:
    return load_suite("builtin")


@pytest.fixture
def seeded(store: MemoryStore, namespace: str) -> list[int]:
    """Three experiences in a fresh namespace."""
    memory = store.open(namespace, embeddings=fake_embeddings())
    return memory.add_items([
        NewItem(text="Parallelise elementwise loops with #pragma omp parallel for", operator="l1_add"),
        NewItem(text="Return 0 from ks_kernel and end every statement with a semicolon", operator="l1_abs"),
        NewItem(text="Handle float16 by converting through float with the header helpers", operator="l1_sigmoid"),
    ])


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

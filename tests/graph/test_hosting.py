"""The graph inside a host: under a Postgres checkpointer, traced, with a flaky model (subgraphs: test_extending)."""

from __future__ import annotations

from functools import partial

import httpx2
import openai
import pytest
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langgraph.checkpoint.postgres import PostgresSaver

from kernelsage.errors import ModelError
from kernelsage.graph import Context, build_graph
from kernelsage.graph.runner import run_episode
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, candidate, example_source


def test_an_interrupted_episode_resumes_and_changes_memory_once(store: MemoryStore, cpu_backend, suite, seeded,
                                                                database_url: str, namespace: str) -> None:
    def crash(messages):
        raise RuntimeError("worker lost")  # not a transient API fault: the run stops here

    model = ScriptedChatModel([candidate(SLOW), crash, candidate(example_source("l1_relu")),
                               "- Parallelise the outer loop and drop redundant passes."])
    with PostgresSaver.from_conn_string(database_url) as saver:
        saver.setup()
        graph = build_graph(models=model, backend=cpu_backend, tasks=partial(find_task, suite),
                            memory_store=store, embeddings=fake_embeddings()).compile(checkpointer=saver)
        settings = Context(namespace=namespace, budget=2, top_k=2)
        run = partial(run_episode, graph, task_id="l1_relu", level=1, context=settings, backend="cpu",
                      model="scripted-test-double", episode_id=f"{namespace}-resume")
        with pytest.raises(RuntimeError, match="worker lost"):
            run()
        final = run()  # same thread id: resumes at the optimizer, not from the start
    assert [a["round"] for a in final["attempts"]] == [1, 2]
    assert len(model.requests) == 4  # round 1 was not written again
    memory = store.open(namespace, embeddings=fake_embeddings())
    assert memory.stats()["episodes"] == 1
    again = memory.commit_episode(memory.load_episode(f"{namespace}-resume"))
    assert not again.applied


class RecordingTracer(BaseTracer):
    """A local tracer: keeps the runs in memory, sends nothing anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _end_trace(self, run: Run) -> None:
        self.runs.append(run)
        super()._end_trace(run)

    def all_runs(self) -> list[Run]:
        found: list[Run] = []
        stack = list(self.runs)
        while stack:
            run = stack.pop()
            found.append(run)
            stack.extend(run.child_runs)
        return found


def test_runs_are_named_and_carry_episode_metadata(store: MemoryStore, cpu_backend, suite, seeded,
                                                   namespace: str) -> None:
    tracer = RecordingTracer()
    model = ScriptedChatModel([candidate(SLOW)])
    graph = build_graph(models=model, backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                        embeddings=fake_embeddings()).compile()
    run_episode(graph, task_id="l1_relu", level=1, context=Context(namespace=namespace, budget=1, top_k=2),
                backend="cpu", model="scripted-test-double", episode_id=f"{namespace}-traced", callbacks=[tracer])
    runs = tracer.all_runs()
    root = next(r for r in runs if r.parent_run_id is None)
    assert root.name == "kernelsage episode l1_relu"
    assert {"kernelsage", "policy:sage", "backend:cpu", "level:1"} <= set(root.tags or [])
    names = {r.name for r in runs}
    assert {"start", "retrieve", "generator", "adoption_gate", "evaluate", "finish", "curator"} <= names
    for node in (r for r in runs if r.name in ("generator", "curator")):
        metadata = node.extra["metadata"]
        assert metadata["operator"] == "l1_relu" and metadata["level"] == 1
        assert metadata["episode_id"] == f"{namespace}-traced" and metadata["policy"] == "sage"
        assert metadata["backend"] == "cpu" and metadata["model"] == "scripted-test-double"
    call = next(r for r in runs if r.run_type == "llm")
    assert call.name == "generator round 1" and call.extra["metadata"]["stage"] == "draft"
    curator = next(r for r in runs if r.name == "curator")
    memory = curator.outputs["memory_update"]
    assert memory["credits"] and memory["policy"] == "sage"  # the credits are visible there


def _rate_limited(messages):
    raise openai.RateLimitError("slow down", body=None, response=httpx2.Response(
        429, request=httpx2.Request("POST", "https://models.invalid/v1/chat/completions")))


def _unauthorised(messages):
    raise openai.AuthenticationError("bad key", body=None, response=httpx2.Response(
        401, request=httpx2.Request("POST", "https://models.invalid/v1/chat/completions")))


def test_a_rate_limited_call_is_retried_and_an_auth_failure_is_not(episode, seeded) -> None:
    state, model = episode([_rate_limited, candidate(SLOW)], budget=1, top_k=2)
    assert state["attempts"][0]["status"] == "ok" and len(model.requests) == 2
    with pytest.raises(ModelError, match="401"):
        episode([_unauthorised, candidate(SLOW)], budget=1, top_k=2)

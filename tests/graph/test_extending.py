"""Extending the episode graph as a user would: inserted nodes with state of their own, the episode wired
into a host's builder, and the episode as a subgraph under a host with another context schema."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from kernelsage.errors import ConfigurationError
from kernelsage.graph import AgentModels, AgentResources, Context, EpisodeState, add_episode, build_graph
from kernelsage.graph.state import attempts, episode_outcome
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, WRONG, candidate


class AuditedState(EpisodeState, total=False):
    audit: Annotated[list[str], operator.add]
    closing_note: str


def audit_node(state: AuditedState) -> dict[str, Any]:
    """A user's node: one line per evaluated candidate, from the typed attempt records."""
    last = attempts(state)[-1]
    return {"audit": [f"round {last.round}: {last.status} correct={last.correct}"]}


def test_a_node_inserted_after_evaluate_writes_its_own_state_key(store: MemoryStore, cpu_backend, suite, seeded,
                                                                 namespace: str) -> None:
    model = ScriptedChatModel([candidate(WRONG), "The fallback writes 1 instead of 0.", candidate(SLOW),
                               "- Clamp negatives to zero, not one."])
    order: list[str] = []

    def note(state: AuditedState) -> dict[str, Any]:
        order.append("note")
        return {"closing_note": f"{len(state['audit'])} audited, solved={state['result']['solved']}"}

    builder = build_graph(models=model, backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                          embeddings=fake_embeddings(), state_schema=AuditedState,
                          insert={"after_evaluate": [("audit", audit_node)], "after_curator": [("note", note)]})
    final = builder.compile().invoke({"task_id": "l1_relu"},
                                     context=Context(namespace=namespace, budget=2, top_k=2))
    # The audit ran between evaluate and the router, once per candidate, and its key survived to the end.
    assert final["audit"] == ["round 1: wrong_result correct=False", "round 2: ok correct=True"]
    assert final["closing_note"] == "2 audited, solved=True" and order == ["note"]
    assert episode_outcome(final).first_correct_round == 2


def test_insertions_are_checked(cpu_backend, suite) -> None:
    make = partial(build_graph, models=ScriptedChatModel([]), backend=cpu_backend, tasks=partial(find_task, suite))
    with pytest.raises(ConfigurationError, match="unknown insertion points \\['after_lunch'\\]"):
        make(insert={"after_lunch": [("x", audit_node)]})
    with pytest.raises(ConfigurationError, match="cannot be named 'evaluate'"):
        make(insert={"after_evaluate": [("evaluate", audit_node)]})


class HostState(TypedDict, total=False):
    request: str
    task_id: str
    result: dict[str, Any]
    answer: str


@dataclass
class HostContext:
    """A host application's own run context: nothing of kernelsage in it."""

    user: str


def test_the_episode_runs_as_a_subgraph_under_a_host_with_another_context_schema(
        store: MemoryStore, cpu_backend, suite, seeded, namespace: str) -> None:
    episode = build_graph(models=ScriptedChatModel([candidate(SLOW)]), backend=cpu_backend,
                          tasks=partial(find_task, suite), memory_store=store, embeddings=fake_embeddings(),
                          default_context=Context(namespace=namespace, budget=1, top_k=2)).compile()
    seen_users: list[str] = []

    def pick(state: HostState, runtime: Runtime[HostContext]) -> dict[str, Any]:
        seen_users.append(runtime.context.user)
        return {"task_id": state["request"]}

    host = StateGraph(HostState, context_schema=HostContext)
    host.add_node("pick", pick)
    host.add_node("kernel", episode)
    host.add_node("answer", lambda state: {"answer": f"solved={state['result']['solved']}"})
    host.add_edge(START, "pick")
    host.add_edge("pick", "kernel")
    host.add_edge("kernel", "answer")
    host.add_edge("answer", END)
    final = host.compile().invoke({"request": "l1_relu"}, context=HostContext(user="ada"))
    assert final["answer"] == "solved=True" and seen_users == ["ada"]
    # The kernelsage settings came from the graph's own defaults: that namespace learned from the episode.
    assert store.open(namespace, embeddings=fake_embeddings()).stats()["episodes"] == 1


@dataclass
class HostContextWithSettings:
    user: str
    kernelsage: Context


def test_a_host_context_can_carry_kernelsage_settings_per_run(store: MemoryStore, cpu_backend, suite, seeded,
                                                               namespace: str) -> None:
    resources = AgentResources(models=AgentModels(generator=ScriptedChatModel([candidate(SLOW)])),
                               backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                               embeddings=fake_embeddings())
    builder = StateGraph(AuditedState, context_schema=HostContextWithSettings)
    builder.add_node("greet", lambda state: {"audit": ["host started"]})
    builder.add_edge(START, "greet")
    add_episode(builder, resources, entry="greet", insert={"after_evaluate": [("audit", audit_node)]})
    final = builder.compile().invoke(
        {"task_id": "l1_relu"},
        context=HostContextWithSettings(user="ada", kernelsage=Context(namespace=f"{namespace}-host", budget=1,
                                                                       top_k=2, policy="uniform")))
    assert final["audit"] == ["host started", "round 1: ok correct=True"]
    assert final["memory_update"]["policy"] == "uniform"  # the per-run settings, not the defaults
    assert store.open(f"{namespace}-host", embeddings=fake_embeddings()).stats()["episodes"] == 1

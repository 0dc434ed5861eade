"""build_graph: the episode state machine, uncompiled, so a host compiles it with its own checkpointer and
store, adds it to its own graph as a subgraph, or wires it into its own builder (`add_episode`).

Users extend it at named points without touching LangGraph internals:

    build_graph(..., state_schema=MyState, insert={"after_evaluate": [("audit", audit_node)]})

runs `audit` after every evaluation, before the episode decides where to go next; the routers read the
state after the inserted nodes, so an inserted node may also steer the episode through the state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph

from kernelsage.errors import ConfigurationError
from kernelsage.graph import routing
from kernelsage.graph.context import Context
from kernelsage.graph.nodes import (
    finish,
    make_adoption_gate_node,
    make_curator_node,
    make_diagnostician_node,
    make_evaluate_node,
    make_generator_node,
    make_optimizer_node,
    make_retrieve_node,
    make_start_node,
    make_tune_node,
)
from kernelsage.graph.resources import AgentModels, AgentResources
from kernelsage.graph.state import EpisodeState
from kernelsage.memory_backend.store import MemoryStore

if TYPE_CHECKING:
    from kernelsage.tasks.model import Task
    from kernelsage.tools.backend import KernelBackend

InsertionPoint = Literal["after_start", "before_write", "after_evaluate", "after_finish", "after_curator"]
INSERTION_POINTS: tuple[str, ...] = get_args(InsertionPoint)
EPISODE_NODES = ("start", "retrieve", "generator", "optimizer", "adoption_gate", "evaluate", "diagnostician",
                 "tune", "finish", "curator")
Insertions = Mapping[InsertionPoint, Sequence[tuple[str, Any]]]  # point -> [(node name, node), ...] in order


def _chain(builder: StateGraph, source: str, nodes: Sequence[tuple[str, Any]]) -> str:
    """Add `nodes` one after another behind `source`; the name of the last one (or `source`)."""
    last = source
    for name, node in nodes:
        if name in EPISODE_NODES:
            raise ConfigurationError(f"an inserted node cannot be named {name!r}: that is an episode node")
        builder.add_node(name, node)
        builder.add_edge(last, name)
        last = name
    return last


def add_episode(builder: StateGraph, resources: AgentResources, *, insert: Insertions | None = None,
                entry: str = START, exit: str = END) -> StateGraph:
    """Wire the episode's nodes and edges into `builder`, from `entry` to `exit`.

    `builder`'s state schema must include `EpisodeState`'s keys. `insert` adds nodes at the points in
    `INSERTION_POINTS`; nodes take `(state)` or `(state, runtime)` and return a partial update.
    """
    insert = dict(insert or {})
    unknown = sorted(set(insert) - set(INSERTION_POINTS))
    if unknown:
        raise ConfigurationError(f"unknown insertion points {unknown}; use {', '.join(INSERTION_POINTS)}")
    builder.add_node("start", make_start_node(resources))
    builder.add_node("retrieve", make_retrieve_node(resources))
    builder.add_node("generator", make_generator_node(resources))
    builder.add_node("optimizer", make_optimizer_node(resources))
    builder.add_node("adoption_gate", make_adoption_gate_node(resources))
    builder.add_node("evaluate", make_evaluate_node(resources))
    builder.add_node("diagnostician", make_diagnostician_node(resources))
    builder.add_node("tune", make_tune_node(resources))
    builder.add_node("finish", finish)
    builder.add_node("curator", make_curator_node(resources))

    builder.add_edge(entry, "start")
    builder.add_edge(_chain(builder, "start", insert.get("after_start", ())), "retrieve")
    builder.add_conditional_edges(_chain(builder, "retrieve", insert.get("before_write", ())),
                                  routing.route_after_retrieve, ["generator", "optimizer"])
    builder.add_edge("generator", "adoption_gate")
    builder.add_edge("optimizer", "adoption_gate")
    builder.add_conditional_edges("adoption_gate", routing.route_after_gate, ["evaluate", "retrieve", "finish"])
    backend = resources.backend.name

    def after_evaluate(state: EpisodeState) -> str:  # the routing needs the backend to read tunables
        return routing.route_after_evaluate(state, backend=backend)

    builder.add_conditional_edges(_chain(builder, "evaluate", insert.get("after_evaluate", ())),
                                  after_evaluate, ["finish", "diagnostician", "retrieve", "tune"])
    builder.add_conditional_edges("tune", routing.route_after_tune, ["finish", "retrieve"])
    builder.add_edge("diagnostician", "retrieve")
    builder.add_edge(_chain(builder, "finish", insert.get("after_finish", ())), "curator")
    builder.add_edge(_chain(builder, "curator", insert.get("after_curator", ())), exit)
    return builder


def build_graph(
    *,
    models: AgentModels | BaseChatModel,
    backend: KernelBackend,
    tasks: Callable[[str], Task],
    memory_store: MemoryStore | None = None,
    embeddings: Embeddings | None = None,
    read_only: bool = False,
    state_schema: type[Any] = EpisodeState,
    context_schema: type[Any] = Context,
    default_context: Context | None = None,
    insert: Insertions | None = None,
) -> StateGraph:
    """The kernel-writing episode for one task: retrieve -> write -> adoption gate -> evaluate ->
    diagnose or refine (after tuning the first correct kernel that declares tunables, when
    `Context.tuning_budget` allows), until the budget is spent; then finish and curate the memory.

    Input: {"task_id": ...}. Settings per run: `context=Context(...)`. `state_schema` may be a subclass of
    `EpisodeState` with keys of your own; under a host whose `context_schema` is not `Context`, the
    settings come from the host context's `kernelsage` attribute, else from `default_context`.
    """
    resources = AgentResources(
        models=models if isinstance(models, AgentModels) else AgentModels(generator=models),
        backend=backend, tasks=tasks, memory_store=memory_store, embeddings=embeddings, read_only=read_only,
        default_context=default_context or Context(),
    )
    return add_episode(StateGraph(state_schema, context_schema=context_schema), resources, insert=insert)

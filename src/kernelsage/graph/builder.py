"""build_graph: the episode state machine, uncompiled, so a host compiles it with its own
checkpointer and store or adds it to its own graph as a subgraph."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph

from kernelsage.graph import routing
from kernelsage.graph.context import Context
from kernelsage.graph.nodes.adoption_gate import make_adoption_gate_node
from kernelsage.graph.nodes.curator import make_curator_node
from kernelsage.graph.nodes.diagnostician import make_diagnostician_node
from kernelsage.graph.nodes.evaluate import make_evaluate_node
from kernelsage.graph.nodes.finish import finish
from kernelsage.graph.nodes.generator import make_generator_node
from kernelsage.graph.nodes.optimizer import make_optimizer_node
from kernelsage.graph.nodes.retrieve import make_retrieve_node
from kernelsage.graph.nodes.start import make_start_node
from kernelsage.graph.resources import AgentModels, AgentResources
from kernelsage.graph.state import EpisodeState
from kernelsage.memory_backend.store import MemoryStore

if TYPE_CHECKING:
    from kernelsage.tasks.model import Task
    from kernelsage.tools.backend import KernelBackend


def build_graph(
    *,
    models: AgentModels | BaseChatModel,
    backend: KernelBackend,
    tasks: Callable[[str], Task],
    memory_store: MemoryStore | None = None,
    embeddings: Embeddings | None = None,
    read_only: bool = False,
) -> StateGraph:
    """The kernel-writing episode for one task: retrieve -> write -> adoption gate -> evaluate ->
    diagnose or refine, until the budget is spent; then finish and curate the memory.

    Input: {"task_id": ...}. Settings per run: `context=Context(...)`.
    """
    resources = AgentResources(
        models=models if isinstance(models, AgentModels) else AgentModels(generator=models),
        backend=backend, tasks=tasks, memory_store=memory_store, embeddings=embeddings, read_only=read_only,
    )

    @cache
    def interface(task_id: str) -> str:
        from kernelsage.tasks.model import describe_interface

        return describe_interface(tasks(task_id))

    graph = StateGraph(EpisodeState, context_schema=Context)
    graph.add_node("start", make_start_node(resources))
    graph.add_node("retrieve", make_retrieve_node(resources))
    graph.add_node("generator", make_generator_node(resources, interface))
    graph.add_node("optimizer", make_optimizer_node(resources, interface))
    graph.add_node("adoption_gate", make_adoption_gate_node(resources))
    graph.add_node("evaluate", make_evaluate_node(resources))
    graph.add_node("diagnostician", make_diagnostician_node(resources, interface))
    graph.add_node("finish", finish)
    graph.add_node("curator", make_curator_node(resources))

    graph.add_edge(START, "start")
    graph.add_edge("start", "retrieve")
    graph.add_conditional_edges("retrieve", routing.route_after_retrieve, ["generator", "optimizer"])
    graph.add_edge("generator", "adoption_gate")
    graph.add_edge("optimizer", "adoption_gate")
    graph.add_conditional_edges("adoption_gate", routing.route_after_gate, ["evaluate", "retrieve", "finish"])
    graph.add_conditional_edges("evaluate", routing.route_after_evaluate, ["finish", "diagnostician", "retrieve"])
    graph.add_edge("diagnostician", "retrieve")
    graph.add_edge("finish", "curator")
    graph.add_edge("curator", END)
    return graph

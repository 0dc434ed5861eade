"""generator: drafting. The model writes a candidate and an adoption record for every shown item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.context import Context
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState
from kernelsage.nodes.common import render, render_history, render_memory
from kernelsage.nodes.writer import candidate_files, write_candidate


def generator_prompt(state: EpisodeState, resources: AgentResources, interface: str) -> str:
    task = resources.tasks(state["task_id"])
    return render(
        "generator", task_id=task.id, level=task.level, category=task.category, description=task.description,
        interface=interface, files=", ".join(candidate_files(resources)), memory=render_memory(state.get("shown", [])),
        history=render_history(state), round=state.get("round", 0) + 1, budget=state.get("budget", 30),
    )


def make_generator_node(resources: AgentResources, interface: Callable[[str], str]) -> Callable[..., dict[str, Any]]:
    model = resources.models.for_role("generator")

    def generator(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        prompt = generator_prompt(state, resources, interface(state["task_id"]))
        return write_candidate(role="generator", model=model, resources=resources, state=state,
                               context=runtime.context, prompt=prompt)

    return generator

"""generator: drafting. The model writes a candidate and an adoption record for every shown item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelsage.graph.nodes.common import render, render_history, render_memory
from kernelsage.graph.nodes.writer import candidate_files, make_writer_node
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState


def generator_prompt(state: EpisodeState, resources: AgentResources, interface: str) -> str:
    task = resources.tasks(state["task_id"])
    return render(
        "generator", task_id=task.id, level=task.level, category=task.category, description=task.description,
        interface=interface, files=", ".join(candidate_files(resources)), memory=render_memory(state.get("shown", [])),
        history=render_history(state), round=state.get("round", 0) + 1, budget=state.get("budget", 30),
    )


def make_generator_node(resources: AgentResources, interface: Callable[[str], str]) -> Callable[..., dict[str, Any]]:
    return make_writer_node("generator", generator_prompt, resources, interface)

"""generator: drafting. The model writes a candidate and an adoption record for every shown item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelsage.graph.nodes.contract import candidate_files_text, kernel_contract, task_interface
from kernelsage.graph.nodes.prompting import render, render_history, render_memory
from kernelsage.graph.nodes.writer import make_writer_node
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, shown_items


def generator_prompt(state: EpisodeState, resources: AgentResources, *, compact: bool = False) -> str:
    """The drafting prompt: task, the kernel's contract and every case (always, whatever the memory shows),
    the files to write (and those the task gives), the memory items, recent attempts. `compact`: shorter
    memory and history, to fit the model's window."""
    task = resources.tasks(state["task_id"])
    return render(
        "generator", task_id=task.id, level=task.level, category=task.category, description=task.description,
        backend=resources.backend.name, contract=kernel_contract(resources.backend, compact),
        interface=task_interface(task, compact), files=candidate_files_text(resources.backend, task),
        memory=render_memory(shown_items(state), compact=compact), history=render_history(state, compact=compact),
        round=state.get("round", 0) + 1, budget=state.get("budget", 30),
    )


def make_generator_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    return make_writer_node("generator", generator_prompt, resources)

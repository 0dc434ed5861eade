"""optimizer: after the first correct kernel, refine the best one using its profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelsage.graph.nodes.contract import kernel_contract, task_interface
from kernelsage.graph.nodes.prompting import code_blocks, render, render_history, render_memory
from kernelsage.graph.nodes.writer import make_writer_node
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, best_attempt, shown_items
from kernelsage.tools.results import ProfileResult


def profile_summary(profile: ProfileResult | None) -> str:
    """The timing figures the optimizer needs (machine details such as thread counts stay out)."""
    if profile is None:
        return "no profile"
    if not profile.timed:
        return f"performance case {profile.case or '?'}: not timed (an interpreter checks correctness only)"
    lines = [f"performance case {profile.case or '?'}"]
    for side, timing in (("candidate", profile.candidate), ("reference", profile.reference)):
        if timing is not None:
            lines.append(f"{side}: mean {timing.mean * 1e3:.4f} ms, median {timing.median * 1e3:.4f} ms, "
                         f"cv {timing.cv:.3f}")
    return "\n".join(lines)


def optimizer_prompt(state: EpisodeState, resources: AgentResources, *, compact: bool = False) -> str:
    """The refining prompt: as the generator's, with the best kernel and its profile."""
    task = resources.tasks(state["task_id"])
    best = best_attempt(state)
    assert best is not None and best.evaluation is not None, "the optimizer runs only after a correct kernel"
    reference, latency = best.reference_latency, best.latency
    return render(
        "optimizer", task_id=task.id, level=task.level, category=task.category, description=task.description,
        backend=resources.backend.name, contract=kernel_contract(resources.backend, compact),
        interface=task_interface(task, compact), best_code=code_blocks(best.files),
        best_latency_ms=f"{latency * 1e3:.4f}" if latency else "?",
        reference_ms=f"{reference * 1e3:.4f}" if reference else "?",
        speedup=f"{reference / latency:.2f}" if reference and latency else "?",
        profile=profile_summary(best.evaluation.profile),
        memory=render_memory(shown_items(state), compact=compact), history=render_history(state, compact=compact),
        round=state.get("round", 0) + 1, budget=state.get("budget", 30),
    )


def make_optimizer_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    return make_writer_node("optimizer", optimizer_prompt, resources)

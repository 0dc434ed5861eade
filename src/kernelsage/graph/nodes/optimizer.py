"""optimizer: after the first correct kernel, refine the best one using its profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelsage.graph.nodes.common import render, render_history, render_memory
from kernelsage.graph.nodes.writer import make_writer_node
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState


def profile_summary(profile: dict) -> str:
    """The timing figures the optimizer needs (machine details such as thread counts stay out)."""
    lines = [f"performance case {profile.get('case', '?')}"]
    for side in ("candidate", "reference"):
        timing = profile.get(side) or {}
        if timing:
            lines.append(f"{side}: mean {timing['mean'] * 1e3:.4f} ms, median {timing['median'] * 1e3:.4f} ms, "
                         f"cv {timing['cv']:.3f}")
    return "\n".join(lines)


def optimizer_prompt(state: EpisodeState, resources: AgentResources, interface: str) -> str:
    task = resources.tasks(state["task_id"])
    best = state["best"]
    assert best is not None, "the optimizer runs only after a correct kernel"
    reference = best.get("reference_latency")
    latency = best.get("latency")
    code = "\n\n".join(f"```cpp file={name}\n{source}\n```" for name, source in best["files"].items())
    return render(
        "optimizer", task_id=task.id, level=task.level, category=task.category, description=task.description,
        interface=interface, best_code=code,
        best_latency_ms=f"{latency * 1e3:.4f}" if latency else "?",
        reference_ms=f"{reference * 1e3:.4f}" if reference else "?",
        speedup=f"{reference / latency:.2f}" if reference and latency else "?",
        profile=profile_summary(best.get("profile") or {}),
        memory=render_memory(state.get("shown", [])), history=render_history(state),
        round=state.get("round", 0) + 1, budget=state.get("budget", 30),
    )


def make_optimizer_node(resources: AgentResources, interface: Callable[[str], str]) -> Callable[..., dict[str, Any]]:
    return make_writer_node("optimizer", optimizer_prompt, resources, interface)

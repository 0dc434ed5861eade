"""start: fix the episode's identity and budget before anything else (so a resumed run keeps them)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState


def make_start_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def start(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        task = resources.tasks(state["task_id"])
        settings = resources.settings(runtime)
        return {
            "episode_id": state.get("episode_id") or f"{task.id}-{uuid.uuid4().hex[:12]}",
            "operator": task.id,
            "level": task.level,
            "stage": "draft",
            "round": 0,
            "budget": settings.budget,
            "early_stop_speedup": settings.early_stop_speedup,
            "tuning_budget": settings.tuning_budget,
            "pending": None,
            "first_correct": None,
            "best": None,
            "diagnosis": None,
            "result": None,
            "memory_update": None,
        }

    return start

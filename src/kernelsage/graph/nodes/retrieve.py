"""retrieve: the memory items for this round's need, plus the resident hot rules."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.context import Context
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, ShownItem
from kernelsage.memory_backend.items import ShownItem as StoredShownItem


def retrieval_query(state: EpisodeState, description: str) -> str:
    """What the memory is asked: the task, and once something failed, the diagnosis and error signature."""
    parts = [description]
    attempts = state.get("attempts", [])
    last = attempts[-1] if attempts else None
    if last is not None and not last["correct"]:
        parts.append(f"failure: {last['status']}")
        errors = (last.get("compile") or {}).get("errors") or []
        if errors:
            parts.append(f"compiler error: {errors[0]['message']}")
        if state.get("diagnosis"):
            parts.append(str(state["diagnosis"]))
    elif state.get("stage") == "refine":
        parts.append("make the correct kernel faster: vectorisation, tiling, parallel loops, memory traffic")
    return "\n".join(parts)


def _shown(entry: StoredShownItem) -> ShownItem:
    return ShownItem(id=entry.item.id, tier=entry.tier, relevance=entry.relevance, score=entry.score,
                     text=entry.item.resident_text, code_example=entry.item.code_example)


def make_retrieve_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def retrieve(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        memory = resources.memory(runtime.context)
        if memory is None:
            return {"shown": [], "hot_version": None}
        task = resources.tasks(state["task_id"])
        rng = random.Random(f"{runtime.context.seed}:{state.get('episode_id')}:{state.get('round', 0)}")
        found = memory.retrieve(retrieval_query(state, task.description), k=runtime.context.top_k,
                                stage=state.get("stage", "draft"), rng=rng)
        return {"shown": [_shown(s) for s in found.shown], "hot_version": found.hot_version}

    return retrieve

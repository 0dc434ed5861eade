"""retrieve: the memory items for this round's need, plus the resident hot rules."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.nodes.bounds import MAX_QUERY_CHARS, MAX_SUMMARY_CHARS, bound
from kernelsage.graph.nodes.prompting import diagnosis_of, first_error
from kernelsage.graph.records import PromptItem, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, attempts, stage_of
from kernelsage.memory_backend.items import ShownItem


def retrieval_query(state: EpisodeState, description: str) -> str:
    """What the memory is asked: once something failed, the first compiler error, the failure and the
    diagnosis, then the task (bounded: MAX_QUERY_CHARS in all). The error comes first so that a long task
    description cannot push it out: it holds the names (an API, an attribute) hybrid retrieval looks up."""
    parts = []
    history = attempts(state)
    last = history[-1] if history else None
    if last is not None and not last.correct:
        first = first_error(last)
        if first is not None:
            parts.append(bound(f"compiler {first.severity}: {first.message}", MAX_SUMMARY_CHARS))
        parts.append(f"failure: {last.status}")
        diagnosis = diagnosis_of(state)
        if diagnosis:
            parts.append(bound(diagnosis, MAX_QUERY_CHARS // 2))
    elif stage_of(state) == "refine":
        parts.append("make the correct kernel faster: vectorisation, tiling, parallel loops, memory traffic")
    return bound("\n".join([*parts, description]), MAX_QUERY_CHARS)


def prompt_item(entry: ShownItem) -> PromptItem:
    return PromptItem(id=entry.item.id, tier=entry.tier, relevance=entry.relevance, score=entry.score,
                      text=entry.item.resident_text, code_example=entry.item.code_example)


def make_retrieve_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def retrieve(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        settings = resources.settings(runtime)
        memory = resources.memory(settings)
        if memory is None:
            return {"shown": [], "hot_version": None}
        task = resources.tasks(state["task_id"])
        rng = random.Random(f"{settings.seed}:{state.get('episode_id')}:{state.get('round', 0)}")
        found = memory.retrieve(retrieval_query(state, task.description), k=settings.top_k, stage=stage_of(state),
                                rng=rng, episode_id=state.get("episode_id"), round=state.get("round", 0) + 1)
        return {"shown": [as_state(prompt_item(s)) for s in found.shown], "hot_version": found.hot_version}

    return retrieve

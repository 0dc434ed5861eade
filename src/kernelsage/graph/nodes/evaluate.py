"""evaluate: compile, verify and profile the gated candidate through the backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.records import Attempt, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, best_attempt, pending_candidate, stage_of
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import content_hash


def make_evaluate_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def evaluate(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        pending = pending_candidate(state)
        assert pending is not None, "the gate routes here only with a resolved candidate"
        evaluation = evaluate_candidate(resources.backend, resources.tasks(state["task_id"]), pending.files)
        attempt = Attempt(round=state.get("round", 0), stage=stage_of(state), status=evaluation.status.value,
                          candidate_hash=content_hash(pending.files), files=pending.files,
                          adopted=pending.adopted_ids, evaluation=evaluation, prompt_tokens=pending.prompt_tokens)
        update: dict[str, Any] = {"attempts": [as_state(attempt)], "pending": None}
        if attempt.correct:
            if state.get("first_correct") is None:
                update |= {"first_correct": as_state(attempt), "stage": "refine"}
            best = best_attempt(state)
            if best is None or attempt.clearly_faster_than(best):
                update["best"] = as_state(attempt)
            update["diagnosis"] = None
        return update

    return evaluate

"""evaluate: compile, verify and profile the gated candidate through the backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.context import Context
from kernelsage.graph.nodes.common import candidate_hash
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import Attempt, EpisodeState
from kernelsage.tools.evaluator import evaluate_candidate


def make_evaluate_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def evaluate(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        pending = state["pending"]
        assert pending is not None, "the gate routes here only with a resolved candidate"
        outcome = evaluate_candidate(resources.backend, resources.tasks(state["task_id"]), pending["files"])
        attempt = Attempt(
            round=state.get("round", 0), stage=state.get("stage", "draft"),
            candidate_hash=candidate_hash(pending["files"]), files=pending["files"], status=outcome["status"],
            correct=outcome["correct"], latency=outcome["latency"], reference_latency=outcome["reference_latency"],
            compile=outcome["compile"], verify=outcome["verify"], profile=outcome["profile"],
            adopted=sorted(int(i) for i, record in pending["adoption"].items() if record["adopted"]),
        )
        update: dict[str, Any] = {"attempts": [attempt], "pending": None}
        if attempt["correct"]:
            if state.get("first_correct") is None:
                update |= {"first_correct": attempt, "stage": "refine"}
            best = state.get("best")
            if best is None or attempt["latency"] < best["latency"]:
                update["best"] = attempt
            update["diagnosis"] = None
        return update

    return evaluate

"""tune: search the tunables of the episode's first correct kernel that declares them (docs/tuning.md), then
judge the winning configuration as a round of its own, kept as best by the rule of every refinement."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.nodes.evaluate import against_best
from kernelsage.graph.records import Attempt, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, attempts, best_attempt
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import content_hash
from kernelsage.tuning.dialects import dialect_for
from kernelsage.tuning.space import TuningError
from kernelsage.tuning.tuner import tune

EVALUATIONS_PER_ROUND = 2  # a round's candidate costs a compile and a profile, as a configuration's first try


def tuning_allowance(state: EpisodeState) -> int:
    """The evaluations (compiles plus profiles) the tuning step may spend: its budget, within the rounds the
    episode has left."""
    rounds_left = state.get("budget", 30) - state.get("round", 0)
    return min(state.get("tuning_budget", 0), EVALUATIONS_PER_ROUND * rounds_left)


def rounds_for(evaluations: int) -> int:
    """The rounds of the episode's budget that `evaluations` compiles plus profiles are charged."""
    return math.ceil(evaluations / EVALUATIONS_PER_ROUND)


def make_tune_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def tune_step(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        kernel = attempts(state)[-1]  # the router comes here right after judging the kernel to tune
        task, backend = resources.tasks(state["task_id"]), resources.backend
        allowance, spent = tuning_allowance(state), state.get("round", 0)
        try:
            result = tune(backend, task, kernel.files, budget=allowance)
        except TuningError as exc:  # its default not correct this time (the router checked everything else)
            failed = {"task_id": task.id, "backend": backend.name, "budget": allowance, "error": str(exc)}
            return {"tuning": [failed], "round": spent + rounds_for(EVALUATIONS_PER_ROUND)}  # at most that spent
        round_ = spent + rounds_for(result.evaluations)
        update: dict[str, Any] = {"tuning": [result.to_dict()], "round": round_}
        if result.winner == result.default:
            return update  # a tie, or the default the fastest: the kernel stays as judged
        files = dialect_for(backend.name)[1](kernel.files, tuple(result.winner.items()))
        evaluation = evaluate_candidate(backend, task, files)
        attempt = Attempt(round=round_, stage="refine", status=evaluation.status.value,
                          candidate_hash=content_hash(files), files=files, evaluation=evaluation,
                          detail=f"tuned: {result.decision}", tuned=True)
        if attempt.correct:
            attempt, is_best = against_best(backend, task, attempt, best_attempt(state))
            if is_best:
                update["best"] = as_state(attempt)
        return update | {"attempts": [as_state(attempt)]}

    return tune_step

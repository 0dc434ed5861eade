"""evaluate: compile, verify and profile the gated candidate through the backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from kernelsage.graph.records import Attempt, Recheck, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, attempts, best_attempt, pending_candidate, stage_of
from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend
from kernelsage.tools.evaluator import evaluate_candidate, profile_again
from kernelsage.tools.results import content_hash


def make_evaluate_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def evaluate(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        pending = pending_candidate(state)
        assert pending is not None, "the gate routes here only with a resolved candidate"
        task = resources.tasks(state["task_id"])
        candidate_hash = content_hash(pending.files)
        earlier = judged_before(state, candidate_hash)
        evaluation = earlier.evaluation if earlier else evaluate_candidate(resources.backend, task, pending.files)
        assert evaluation is not None
        attempt = Attempt(round=state.get("round", 0), stage=stage_of(state), status=evaluation.status.value,
                          candidate_hash=candidate_hash, files=pending.files, adopted=pending.adopted_ids,
                          evaluation=evaluation, prompt_tokens=pending.prompt_tokens,
                          detail=f"the same files as round {earlier.round}: its verdict, not judged again"
                          if earlier else "")
        update: dict[str, Any] = {"pending": None}
        if attempt.correct:
            if state.get("first_correct") is None:
                update |= {"first_correct": as_state(attempt), "stage": "refine"}
            # A repeat was held against the best when first judged: judging it again would be another draw of
            # the recheck for the same measurement, so it never becomes the best a second time.
            is_best = False
            if earlier is None:
                attempt, is_best = against_best(resources.backend, task, attempt, best_attempt(state))
            if is_best:
                update["best"] = as_state(attempt)
            update["diagnosis"] = None
        return update | {"attempts": [as_state(attempt)]}

    return evaluate


def judged_before(state: EpisodeState, candidate_hash: str) -> Attempt | None:
    """The episode's earlier round that submitted these very files and was judged, if any: judging them again
    would measure the machine, not the kernel (a second profile of one kernel can only differ by noise, and a
    kernel correct by chance would get another draw), so its verdict stands for the repeat."""
    return next((a for a in attempts(state) if a.candidate_hash == candidate_hash and a.evaluation is not None),
                None)


def against_best(backend: KernelBackend, task: Task, attempt: Attempt, best: Attempt | None) -> tuple[Attempt, bool]:
    """A correct `attempt` rechecked against the best so far, and whether it becomes the best: the rule that
    keeps every correct round (a refinement's, a tuned configuration's)."""
    attempt = rechecked(backend, task, attempt, best)
    return attempt, best is None or attempt.improves_on(best)


def rechecked(backend: KernelBackend, task: Task, attempt: Attempt, best: Attempt | None) -> Attempt:
    """`attempt`, with the best kernel so far profiled again beside it when it claims to beat it (what
    `Attempt.improves_on` holds it against); as it is otherwise. One extra profile per claimed improvement,
    except a claim so large that the machine's drift between runs cannot make it (`Attempt.faster_beyond_drift`)."""
    if best is None or not attempt.clearly_faster_than(best) or attempt.faster_beyond_drift(best):
        return attempt
    profiled = profile_again(backend, task, best.files)
    if profiled is None or profiled.candidate is None or profiled.reference is None:
        return attempt
    return attempt.model_copy(update={"rechecked": Recheck(round=best.round, candidate=profiled.candidate,
                                                          reference=profiled.reference)})

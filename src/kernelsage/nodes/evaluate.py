"""evaluate: compile, verify and profile the gated candidate through the backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from kernelsage.graph.context import Context
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import Attempt, EpisodeState
from kernelsage.nodes.common import candidate_hash

if TYPE_CHECKING:
    from kernelsage.evals.tasks import Task
    from kernelsage.tools.backend import KernelBackend
    from kernelsage.tools.results import VerifyResult


def verify_summary(result: VerifyResult) -> dict[str, Any]:
    """What the state keeps of a verification: the verdict and the first failing case, not every case."""
    failure = result.first_failure()
    return {
        "status": result.status.value, "correct": result.correct, "message": result.message,
        "trials": result.trials, "case_runs": len(result.cases),
        "passed_runs": sum(1 for c in result.cases if c.passed),
        "first_failure": failure.to_dict() if failure else None, "stderr_tail": result.stderr_tail[-2000:],
    }


def evaluate_candidate(backend: KernelBackend, task: Task, files: dict[str, str]) -> dict[str, Any]:
    """Compile, then verify, then profile; stops at the first step that fails."""
    from kernelsage.tools.results import Candidate

    compiled = backend.compile(Candidate(task_id=task.id, files=files))
    result: dict[str, Any] = {"status": compiled.status.value, "correct": False, "latency": None,
                              "reference_latency": None, "compile": compiled.to_dict(), "verify": None,
                              "profile": None}
    result["compile"].pop("log", None)  # the parsed errors carry what matters; logs can be long
    if not compiled.ok or compiled.artifact is None:
        return result
    verified = backend.verify(compiled.artifact, task)
    result |= {"status": verified.status.value, "verify": verify_summary(verified)}
    if not verified.correct:
        return result
    profiled = backend.profile(compiled.artifact, task)
    result |= {"status": profiled.status.value, "profile": profiled.to_dict()}
    if profiled.ok and profiled.output_correct and profiled.candidate and profiled.reference:
        result |= {"correct": True, "latency": profiled.candidate.mean,
                   "reference_latency": profiled.reference.mean}
    return result


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

"""One candidate through a backend: compile, then verify, then profile, as one plain record."""

from __future__ import annotations

from typing import Any

from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend
from kernelsage.tools.results import Candidate, VerifyResult


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



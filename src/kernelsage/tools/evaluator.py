"""One candidate through a backend: compile, then verify, then profile, as one `Evaluation`."""

from __future__ import annotations

from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend
from kernelsage.tools.redaction import redact_record
from kernelsage.tools.results import Candidate, Evaluation, ProfileResult

LOG_TAIL = 4000  # the parsed errors carry what matters; a full build log can be long


def evaluate_candidate(backend: KernelBackend, task: Task, files: dict[str, str]) -> Evaluation:
    """Compile, then verify, then profile; stops at the first step that fails. Secret values are redacted
    from every text of the result (it is kept in the state and shown to the model)."""
    return redact_record(_evaluate(backend, task, files))


def profile_again(backend: KernelBackend, task: Task, files: dict[str, str]) -> ProfileResult | None:
    """A kernel already judged correct, profiled once more (its build comes from the cache); None when the
    profile does not give both timings."""
    compiled = backend.compile(Candidate(task_id=task.id, files=files), task=task)
    if not compiled.ok or compiled.artifact is None:
        return None
    profiled = backend.profile(compiled.artifact, task)
    usable = profiled.ok and profiled.output_correct and profiled.candidate is not None and profiled.reference
    return profiled if usable else None


def _evaluate(backend: KernelBackend, task: Task, files: dict[str, str]) -> Evaluation:
    compiled = backend.compile(Candidate(task_id=task.id, files=files), task=task)
    compiled = compiled.model_copy(update={"log": compiled.log[-LOG_TAIL:]})
    if not compiled.ok or compiled.artifact is None:
        return Evaluation(status=compiled.status, compile=compiled)
    verified = backend.verify(compiled.artifact, task)
    if not verified.correct:
        return Evaluation(status=verified.status, compile=compiled, verify=verified)
    profiled = backend.profile(compiled.artifact, task)
    timings = profiled.candidate is not None and profiled.reference is not None
    # an untimed profile (an interpreter) checks the output only: correct without latencies
    correct = bool(profiled.ok and profiled.output_correct and (timings or not profiled.timed))
    return Evaluation(
        status=profiled.status, compile=compiled, verify=verified, profile=profiled, correct=correct,
        # medians: a kernel fast on a minority of calls (through state it kept, say) moves the mean, not the median
        latency=profiled.candidate.median if correct and profiled.timed and profiled.candidate else None,
        reference_latency=profiled.reference.median if correct and profiled.timed and profiled.reference else None,
    )

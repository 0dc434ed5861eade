"""What a sandboxed child does for the cpu backend: compile, verify, profile. Runs only inside the sandbox.

`prepare` runs in the worker before the fork and loads (and caches) the task, so each child starts with it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelsage.tasks.loaders import load_task
from kernelsage.tasks.model import Task, TaskOrigin
from kernelsage.tools.compare import classify, compare_output, matches, poison
from kernelsage.tools.cpu.abi import KernelCall, load_entry_point
from kernelsage.tools.results import CaseResult, Status
from kernelsage.tools.timing import measure

Emit = Callable[[dict[str, Any]], None]
_TASKS: dict[tuple[str, str, str, float], Task] = {}


class HarnessFailure(RuntimeError):
    """The task's reference or the harness failed: not the candidate's fault."""

    harness = True


def prepare(payload: dict[str, Any]) -> Task | None:
    """Load the job's task in the worker (cached while its file is unchanged)."""
    if "task" not in payload:
        return None
    origin = TaskOrigin(**payload["task"]["origin"])
    key = (origin.format, origin.path, payload["task"]["id"], Path(origin.path).stat().st_mtime)
    if key not in _TASKS:
        _TASKS[key] = load_task(origin, payload["task"]["id"])
    return _TASKS[key]


def build(payload: dict[str, Any], context: Any, emit: Emit) -> None:
    """Run the compiler on the sources already written into the working directory."""
    started = time.perf_counter()
    completed = subprocess.run(payload["command"], capture_output=True, text=True, errors="replace", check=False)
    emit({"kind": "result", "data": {"returncode": completed.returncode,
                                     "log": (completed.stdout + completed.stderr)[-20000:],
                                     "seconds": time.perf_counter() - started}})


def case_seed(seed: int, trial: int, case_index: int) -> int:
    return (seed * 1_000_003 + trial * 10_007 + case_index * 101) % (2**62)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _reference(task: Task, case_index: int, case: Any, seed: int) -> tuple[Any, tuple[torch.Tensor, ...]]:
    try:
        instance = task.instantiate(case, seed)
        with torch.inference_mode():
            expected = instance.reference()
    except Exception as exc:
        raise HarnessFailure(f"the reference of case {case.name!r} failed: {type(exc).__name__}: {exc}") from exc
    return instance, expected


def _outputs_like(expected: tuple[torch.Tensor, ...], trial: int) -> list[torch.Tensor]:
    outputs = [torch.empty(tuple(e.shape), dtype=e.dtype) for e in expected]
    for output in outputs:
        poison(output, trial)
    return outputs


def verify(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """Every case, several trials of fresh inputs, all in one process (so results cached across calls show)."""
    torch.set_num_threads(payload["threads"])
    kernel = load_entry_point(payload["library"])
    previous: dict[str, tuple[torch.Tensor, ...]] = {}
    failed = False
    for trial in range(payload["trials"]):
        for index, case in enumerate(task.cases):
            emit({"kind": "progress", "case": case.name, "trial": trial})
            instance, expected = _reference(task, index, case, case_seed(payload["seed"], trial, index))
            tolerances = [task.tolerance(_dtype_name(e.dtype)) for e in expected]
            outputs = _outputs_like(expected, trial)
            inputs = [tensor.contiguous() for tensor in instance.inputs.values()]
            code = KernelCall(kernel, inputs, outputs, instance.attrs)()
            result = _case_result(case.name, trial, code, expected, outputs, tolerances, previous.get(case.name))
            emit({"kind": "case", "data": result})  # streamed, so a later crash does not lose it
            failed = failed or not result["passed"]
            previous[case.name] = expected
        if failed:
            break  # report the failing trial in full; later trials add nothing
    emit({"kind": "result", "data": {"done": True}})


def _case_result(name: str, trial: int, code: int, expected: tuple[torch.Tensor, ...], outputs: list[torch.Tensor],
                 tolerances: list[Any], previous: tuple[torch.Tensor, ...] | None) -> dict[str, Any]:
    if code != 0:
        return CaseResult(case=name, trial=trial, passed=False, status=Status.RUNTIME_ERROR,
                          message=f"ks_kernel returned {code}").to_dict()
    comparisons = [compare_output(e, a, t, trial, i) for i, (e, a, t) in enumerate(zip(expected, outputs, tolerances, strict=True))]
    status = classify(comparisons)
    message = ""
    if status is not Status.OK and previous is not None and matches(previous, outputs, tolerances, trial):
        status = Status.CACHED_RESULT
        message = "the outputs equal the previous call's answer for this case, not this call's"
    n_rel = sum(c.n_rel for c in comparisons)
    n_elements = sum(c.n_elements for c in comparisons)
    return CaseResult(
        case=name, trial=trial, passed=status is Status.OK, status=status, n_elements=n_elements,
        n_mismatch=sum(c.n_mismatch for c in comparisons), n_unwritten=sum(c.n_unwritten for c in comparisons),
        max_abs_error=max(c.max_abs for c in comparisons),
        mean_abs_error=sum(c.sum_abs for c in comparisons) / max(n_elements, 1),
        max_rel_error=max(c.max_rel for c in comparisons),
        mean_rel_error=sum(c.sum_rel for c in comparisons) / max(n_rel, 1),
        atol=max(t.atol for t in tolerances), rtol=max(t.rtol for t in tolerances),
        mismatches=[m for c in comparisons for m in c.mismatches][:8], message=message,
    ).to_dict()


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """Time the candidate and the reference with the same function on the same performance-case inputs."""
    torch.set_num_threads(payload["threads"])
    kernel = load_entry_point(payload["library"])
    case = task.perf_case
    emit({"kind": "progress", "case": case.name, "trial": 0})
    instance, expected = _reference(task, 0, case, case_seed(payload["seed"], 0, 0))
    tolerances = [task.tolerance(_dtype_name(e.dtype)) for e in expected]
    outputs = _outputs_like(expected, 0)
    call = KernelCall(kernel, [t.contiguous() for t in instance.inputs.values()], outputs, instance.attrs)
    code = call()
    if code != 0:
        emit({"kind": "result", "data": {"status": "runtime_error", "message": f"ks_kernel returned {code}"}})
        return
    correct = classify([compare_output(e, a, t, 0, i)
                        for i, (e, a, t) in enumerate(zip(expected, outputs, tolerances, strict=True))]) is Status.OK
    warmup, reps = payload["warmup"], payload["reps"]
    candidate = measure(call, warmup=warmup, reps=reps)
    with torch.inference_mode():
        reference = measure(instance.reference, warmup=warmup, reps=reps)
    emit({"kind": "result", "data": {"status": "ok", "case": case.name, "output_correct": correct,
                                     "candidate": candidate.to_dict(), "reference": reference.to_dict(),
                                     "threads": int(os.environ.get("OMP_NUM_THREADS", "0") or 0)}})

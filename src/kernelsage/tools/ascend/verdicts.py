"""The judge's verdicts on a device run: pure functions of the judge's own references and inputs and of what
the run handed back (untrusted data: checked for shape, type and count before use).

Correctness uses the shared comparison (`kernelsage.tools.compare`): an element fails only when both its
absolute and relative errors exceed the task's per-dtype tolerance (NPUKernelBench's rule), or the task's
own precision check where it has one; unwritten outputs, NaN/Inf, modified inputs and results cached
across calls are told apart as on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from kernelsage.tasks.model import Task, TestCase
from kernelsage.tools.judging.instances import dtype_name, output_check
from kernelsage.tools.judging.verdicts import case_result, failed_case, inputs_modified
from kernelsage.tools.results import Status

# What the NPU runtime prints when a kernel faults on the device (AI Core exceptions, timeouts, illegal
# addresses); the first such line becomes the case's message.
DEVICE_FAULT_WORDS = ("aicore exception", "AICore exception", "aivec error", "EZ9999", "507015", "507014",
                      "507035", "illegal address", "kernel execution timeout", "ACL_ERROR_RT")
STARTED = b"kernelsage device runner started"  # what a sandboxed runner writes first (jobs.run_device)
OUT_OF_MEMORY_WORDS = ("out of memory", "ACL_ERROR_RT_MEMORY_ALLOCATION", "207001")


class AttributeMismatch(ValueError):
    """The candidate's operator declares more attributes than the task gives (the candidate's fault)."""


def attr_args(attrs: dict[str, Any], order: Sequence[str]) -> list[Any]:
    """The task's attributes in the order an msopgen operator's aclnn API takes them: by name, and a name
    the task lacks takes the next attribute no name claimed; [] for the direct route. An attribute left
    without a value is refused: a made-up value would run the kernel on something the task never asked."""
    unclaimed = iter([value for name, value in attrs.items() if name not in order])
    args = []
    for name in order:
        value = attrs[name] if name in attrs else next(unclaimed, AttributeMismatch)
        if value is AttributeMismatch:
            raise AttributeMismatch(
                f"the operator declares attribute {name!r}, for which the task has no value (its attributes: "
                f"{', '.join(attrs) or 'none'}): declare only the task's attributes, in its order")
        args.append(value)
    return args


def device_message(stderr: str) -> str:
    """The first line of the runtime's output that names a device fault ('' if none does)."""
    return next((line.strip() for line in stderr.splitlines() if any(w in line for w in DEVICE_FAULT_WORDS)), "")


def device_failure(result: dict[str, Any] | None, returncode: int | None, timed_out: bool, stderr: str,
                   wall_s: float, sandbox_started: bool = True) -> tuple[Status | None, str]:
    """Why a device run produced no usable result, or (None, '') when it did. `sandbox_started` False (the
    sandbox never started the runner) is the harness's failure, whatever the output says."""
    if not sandbox_started:
        first = stderr.strip().splitlines()[:1]
        return Status.HARNESS_ERROR, "the sandbox could not start the device run" + (f": {first[0]}" if first else "")
    if timed_out:
        return Status.TIMEOUT, f"killed after the wall-clock limit of {wall_s:g} s"
    if result is not None and "failure" not in result:
        return None, ""
    error = str((result or {}).get("error", ""))
    if (result or {}).get("failure") == "harness":
        return Status.HARNESS_ERROR, error
    if (result or {}).get("failure") == "oom" or any(w in stderr for w in OUT_OF_MEMORY_WORDS):
        return Status.OOM, f"ran out of device memory: {error or device_message(stderr)}".rstrip(": ")
    fault = device_message(stderr)
    if error:
        return Status.RUNTIME_ERROR, error + (f" (device: {fault})" if fault and fault not in error else "")
    if returncode is not None and returncode < 0:
        return Status.RUNTIME_ERROR, f"the device run crashed with signal {-returncode}" + (f": {fault}" if fault else "")
    return Status.RUNTIME_ERROR, fault or f"the device run exited with code {returncode} without a result"


def _tensors(value: Any, count: int) -> list[torch.Tensor] | None:
    if not isinstance(value, list) or len(value) != count or not all(isinstance(t, torch.Tensor) for t in value):
        return None
    return value


def nonfinite_problem(expected: Sequence[torch.Tensor], actual: Sequence[torch.Tensor], rule: str) -> str:
    """Where a suite fails any NaN (rule "nan": MultiKernelBench's allclose) or any NaN or inf (rule "nan_inf":
    NPUKernelBench's check_precision), in the reference's output as in the kernel's: which output has one."""
    if not rule:
        return ""
    for side, tensors in (("the kernel's", actual), ("the reference's", expected)):
        for index, tensor in enumerate(tensors):
            if not (tensor.is_floating_point() or tensor.is_complex()):
                continue
            bad = torch.isnan(tensor) if rule == "nan" else ~torch.isfinite(tensor)
            if bool(bad.any()):
                what = "NaN" if rule == "nan" else "NaN or inf"
                return (f"{side} output {index} holds {int(bad.sum())} {what} value(s), which the suite's rule "
                        "fails wherever they are")
    return ""


def judge_outputs(task: Task, case: TestCase, expected: Sequence[torch.Tensor], outputs: Any, code: Any,
                  trial: int = 0, previous: Sequence[torch.Tensor] | None = None, nonfinite: str = "") -> dict[str, Any]:
    """One call's case result from the outputs the run returned (checked: count, dtype, shape); `nonfinite`:
    the suite's rule for NaN and inf (`nonfinite_problem`), unless the task brings its own precision check."""
    actual = _tensors(outputs, len(expected))
    if actual is None or not isinstance(code, int):
        return failed_case(case.name, trial, Status.RUNTIME_ERROR, "the device run returned no usable outputs")
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            return failed_case(case.name, trial, Status.WRONG_RESULT,
                               f"output {index} came back as {dtype_name(got.dtype)} {list(got.shape)}, expected "
                               f"{dtype_name(want.dtype)} {list(want.shape)}")
    problem = "" if task.custom_check is not None else nonfinite_problem(expected, actual, nonfinite)
    if problem:
        return failed_case(case.name, trial, Status.WRONG_RESULT, problem)
    tolerances = [task.tolerance(dtype_name(e.dtype)) for e in expected]
    return case_result(case.name, trial, code, expected, actual, tolerances, previous, custom=output_check(task, case))


def judge_verify(task: Task, calls: Sequence[dict[str, Any]], expected: Sequence[Sequence[torch.Tensor]],
                 private_inputs: Sequence[Sequence[torch.Tensor]], input_names: Sequence[Sequence[str]],
                 result: dict[str, Any] | None, returncode: int | None, timed_out: bool, stderr: str,
                 wall_s: float, sandbox_started: bool = True, nonfinite: str = "",
                 aliased: Sequence[frozenset[int]] | None = None) -> list[dict[str, Any]]:
    """The case results of a verify run, in call order, up to and including the first failure.
    `aliased` (a suite's own glue), per call: the inputs the reference returns as outputs (an in-place
    operator's), judged with the outputs instead of byte for byte against the reference's inputs."""
    cases_by_name = {case.name: case for case in task.cases}
    status, message = device_failure(result, returncode, timed_out, stderr, wall_s, sandbox_started)
    returned = (result or {}).get("calls") if status is None else None
    if status is not None or not isinstance(returned, list):
        first = calls[0]
        return [failed_case(first["case"], first["trial"], status or Status.RUNTIME_ERROR,
                            message or "the device run returned no calls")]
    results: list[dict[str, Any]] = []
    previous: dict[str, Sequence[torch.Tensor]] = {}
    for index, call in enumerate(calls):
        if index >= len(returned) or not isinstance(returned[index], dict):
            results.append(failed_case(call["case"], call["trial"], Status.RUNTIME_ERROR,
                                       device_message(stderr) or "the device run stopped before this call"))
            break
        answer = returned[index]
        if "error" in answer:
            fault = device_message(stderr)
            results.append(failed_case(call["case"], call["trial"], Status.RUNTIME_ERROR,
                                       str(answer["error"]) + (f" (device: {fault})" if fault else "")))
            break
        seen = _tensors(answer.get("inputs"), len(private_inputs[index]))
        outputs_too = aliased[index] if aliased is not None else frozenset()
        keep = [i for i in range(len(private_inputs[index])) if i not in outputs_too]
        changed = "" if seen is None else inputs_modified([seen[i] for i in keep],
                                                          [private_inputs[index][i] for i in keep],
                                                          [input_names[index][i] for i in keep])
        if seen is None or changed:
            results.append(failed_case(call["case"], call["trial"], Status.INPUT_MODIFIED if changed
                                       else Status.RUNTIME_ERROR, f"the kernel modified its inputs: {changed}"
                                       if changed else "the device run returned no inputs to check"))
            break
        case = cases_by_name[call["case"]]
        verdict = judge_outputs(task, case, expected[index], answer.get("outputs"), answer.get("code"),
                                call["trial"], previous.get(case.name), nonfinite)
        results.append(verdict)
        previous[case.name] = expected[index]
        if not verdict["passed"]:
            break
    return results


def checked_samples(samples: Any, reps: int) -> list[float]:
    """Timed samples from a device run, refused unless there are `reps` finite, positive seconds."""
    if not isinstance(samples, list) or len(samples) != reps or not all(
            isinstance(s, float) and math.isfinite(s) and s > 0 for s in samples):
        raise ValueError(f"the device run returned malformed timings (expected {reps} positive seconds)")
    return samples

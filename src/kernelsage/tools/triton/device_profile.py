"""Timing Triton kernels on a GPU or NPU: the judge's clock, L2 flushed before every call, warm-ups, and the
reference timed the same way on the same device. Built against torch.cuda / torch.npu's documented
interfaces; not run on this project's CPU-only machines (docs/triton.md says what a GPU host must confirm).

Each candidate call is timed by the judge from its request to the reply, which the runner sends after the
device synchronised and the outputs were copied back to the shared memory the judge checks; the calibrated
round trip of an empty request is subtracted. The reference is timed in the judge over the same span: the
call, a synchronisation and the copy of its outputs to the host. Both sides start with L2 flushed (the runner
flushes before each call, outside the timed span; the judge before each reference call). Every call's output
is poisoned before and checked after.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kernelsage.tasks.model import CaseInstance, Task
from kernelsage.tools.cpu.judge import Emit, plan, reference
from kernelsage.tools.cpu.runner import RunnerFailed
from kernelsage.tools.cpu.verdicts import case_result
from kernelsage.tools.timing import timing_from_samples
from kernelsage.tools.triton.judge import TritonJudge

L2_FLUSH_BYTES = 256 << 20


def device_module(device: str) -> Any:
    """torch.cuda or torch.npu (torch_npu imported here only: this runs in the judge on an NPU host)."""
    if device == "npu":
        import torch_npu  # noqa: F401

        return torch.npu
    return torch.cuda


def time_reference(instance: CaseInstance, device: str, warmup: int, reps: int) -> list[float]:
    """The reference's calls on the device, each from a flushed L2 to its outputs on the host, in seconds."""
    module = device_module(device)
    for tensor in instance.inputs.values():  # the bound reference now reads device copies
        tensor.data = tensor.data.to(device)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    samples = []
    with torch.inference_mode():
        for call in range(warmup + reps):
            flush.zero_()
            module.synchronize()
            started = time.perf_counter()
            outputs = instance.reference()
            module.synchronize()
            _ = [output.cpu() for output in outputs]
            if call >= warmup:
                samples.append(time.perf_counter() - started)
    return samples


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """The performance case: the candidate's calls, each output checked, then the reference's."""
    judge = TritonJudge(payload, emit)
    warmup, reps = int(payload["warmup"]), int(payload["reps"])
    judge.phase("reference")
    instance, expected = reference(task, task.perf_case, int(payload["seed"]))
    prepared, input_bytes, output_bytes = plan(task, [(instance, expected)])
    item = prepared[0]
    samples: list[float] = []
    try:
        judge.start(input_bytes, output_bytes)
        for call in range(warmup + reps):
            _, outputs, seconds = judge.call(item, call)
            judge.phase("compare")
            result = case_result(task.perf_case.name, call, 0, expected, outputs, item.tolerances, None)
            if not result["passed"]:
                emit({"kind": "result", "data": {"status": result["status"], "message": (
                    f"call {call} of the performance case: {result['n_mismatch']} of {result['n_elements']} "
                    "elements wrong")}})
                return
            assert judge.runner is not None
            judge.phase("candidate")
            judge.runner.thaw()
            if call >= warmup:
                samples.append(seconds)
        round_trip = judge.runner.round_trip if judge.runner else 0.0
    except RunnerFailed as failure:
        emit({"kind": "result", "data": {"status": failure.status.value, "message": failure.message}})
        return
    finally:
        judge.stop()
    judge.phase("reference")
    reference_samples = time_reference(instance, judge.device, warmup, reps)
    emit({"kind": "result", "data": {
        "status": "ok", "case": task.perf_case.name, "output_correct": True, "input_sets": 1,
        "round_trip_s": round_trip, "contents": "repeated",
        "candidate": timing_from_samples(samples, warmup=warmup).model_dump(),
        "reference": timing_from_samples(reference_samples, warmup=warmup).model_dump()}})

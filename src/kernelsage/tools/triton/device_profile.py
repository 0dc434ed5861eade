"""Timing Triton kernels on a GPU or NPU: the judge's clock, L2 flushed before every call, warm-ups, and the
reference timed the same way on the same device, call by call on the same contents. Built against torch.cuda /
torch.npu's documented interfaces; its protocol runs on the CPU in the tests, through a stand-in `Accelerator`
(tests/tools/triton/test_device_profile.py), with the real sandboxed runner on the interpreter.

The cpu profile's protections (tools/cpu/profile.py), on the device:

1. Up to 4 input sets of the performance case (`contents.input_sets`), made by the task's generator under
   `case_seed`; where the task allows it every call gets fresh contents (`contents.FreshContents`: each floating
   input blended element by element with a partner set), else the calls visit the sets in random order.
2. `contents.unseen_calls` timed calls, at positions drawn from the system's generator, get a whole instance made
   afresh; a kernel clearly slower on them than on the others, relative to the reference (`timing.slower_on_unseen`),
   kept something that paid: cached_result.
3. Before each candidate call the reference runs on the device on that call's contents (copied there outside the
   timed span; flushed L2, the call, a synchronisation, its outputs copied to the host, timed), with the runner
   frozen; its outputs are the call's expected answer.
4. The candidate's call: the contents written to the shared inputs, the outputs poisoned, staged on the device by
   the runner (L2 flushed there), timed by the judge from the `run` request to the reply (sent after the device
   synchronised and the outputs were copied back), less the calibrated empty round trip.
5. Every call's whole output is compared with the reference's (`all_close`, `case_result` where that fails): no
   sampled position decides anything, and the inputs are checked whole. An output holding an earlier call's
   answer is named cached_result (checked at positions kept per call: a label, the verdict is already a failure).

Order, partners, offsets, which calls are unseen: `tools.unpredictable` (os.urandom), never a seeded generator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelsage.tasks.model import CaseInstance, Task
from kernelsage.tools import unpredictable
from kernelsage.tools.compare import all_close, gather
from kernelsage.tools.judging.contents import (
    DEFAULT_SETS,
    UNSEEN_TRIAL,
    FreshContents,
    check_unseen,
    input_sets,
    unseen_calls,
)
from kernelsage.tools.judging.core import CheckFailed, Emit, HarnessFailure, RunnerFailed
from kernelsage.tools.judging.instances import (
    Prepared,
    case_seed,
    instantiate,
    output_check,
    placed_like,
    plan,
    run_reference,
)
from kernelsage.tools.judging.verdicts import case_result, inputs_modified
from kernelsage.tools.results import Status
from kernelsage.tools.timing import TimedCall, timing_from_samples
from kernelsage.tools.triton.judge import TritonJudge

L2_FLUSH_BYTES = 256 << 20
KEPT_POSITIONS = 256  # positions of each output kept per call, to name an earlier call's answer replayed


class Accelerator(Protocol):
    """What the profile needs of a device: its torch name, a synchronisation, how much to write to flush its L2."""

    name: str
    flush_bytes: int

    def synchronize(self) -> None: ...


@dataclass(frozen=True)
class TorchDevice:
    """torch.cuda or torch.npu behind `Accelerator`."""

    name: str
    module: Any
    flush_bytes: int = L2_FLUSH_BYTES

    def synchronize(self) -> None:
        self.module.synchronize()


def accelerator(device: str) -> TorchDevice:
    """The device of a profile job (torch_npu imported here only: this runs in the judge on an NPU host)."""
    if device == "npu":
        import torch_npu  # noqa: F401

        return TorchDevice("npu", torch.npu)
    return TorchDevice("cuda", torch.cuda)


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """The performance case on the job's GPU or NPU."""
    run_profile(payload, task, emit, accelerator(payload["device"]))


def run_profile(payload: dict[str, Any], task: Task, emit: Emit, device: Accelerator) -> None:
    """The candidate's and the reference's calls, interleaved on fresh contents and unseen instances, every output
    checked whole; one result event."""
    judge = TritonJudge(payload, emit)
    warmup, reps = int(payload["warmup"]), int(payload["reps"])
    try:
        judge.phase("reference")
        prepared, set_bytes, output_bytes = input_sets_of(task, int(payload["seed"]),
                                                          int(payload.get("sets", DEFAULT_SETS)))
        contents = FreshContents.build(prepared, task.perf_case)
        unseen = min(unseen_calls(set_bytes), reps)
        timed = _DeviceCalls(judge, device, task, prepared, int(payload["seed"]), contents)
        judge.start(set_bytes, output_bytes)
        timed.run(warmup, reps, unseen)
    except (RunnerFailed, CheckFailed) as failure:
        emit({"kind": "result", "data": {"status": failure.status.value, "message": failure.message}})
        return
    finally:
        judge.stop()
    emit({"kind": "result", "data": {
        "status": "ok", "case": task.perf_case.name, "output_correct": True, "input_sets": len(prepared),
        "round_trip_s": timed.round_trip, "fresh_inputs": contents is not None, "unseen_calls": unseen,
        "contents": "repeated" if contents is None else "elementwise" if contents.elementwise else "whole",
        "candidate": timing_from_samples(timed.candidate, warmup=warmup).model_dump(),
        "reference": timing_from_samples(timed.reference, warmup=warmup).model_dump()}})


def input_sets_of(task: Task, seed: int, most: int) -> tuple[list[Prepared], int, int]:
    """The performance case's input sets, every one at the same places (one set sits in the arena at a time),
    the first with its (CPU) reference answer; and the bytes of one set's inputs and outputs."""
    case = task.perf_case
    first = instantiate(task, case, case_seed(seed, 0, 0))
    expected = run_reference(first, case)
    one, set_bytes, output_bytes = plan(task, [(first, expected)], outputs_like=expected)
    prepared = one + [placed_like(task, instantiate(task, case, case_seed(seed, k, 0)), one[0])
                      for k in range(1, input_sets(most, set_bytes))]
    return prepared, set_bytes, output_bytes


class _DeviceCalls:
    """The interleaved loop of one device profile: per call, the contents, the reference, the candidate, checks."""

    def __init__(self, judge: TritonJudge, device: Accelerator, task: Task, prepared: list[Prepared], seed: int,
                 contents: FreshContents | None) -> None:
        self.judge, self.device, self.task, self.prepared, self.seed = judge, device, task, prepared, seed
        self.contents = contents
        self.custom = output_check(task, task.perf_case)
        self.flush = torch.empty(device.flush_bytes, dtype=torch.uint8, device=device.name)
        self.unseen_made = 0
        self.round_trip = 0.0
        self.candidate: list[float] = []
        self.reference: list[float] = []
        self.previous: tuple[torch.Tensor, ...] | None = None
        sizes = [math.prod(place.shape) for place in prepared[0].output_places]
        self.kept_at = [unpredictable.positions(min(KEPT_POSITIONS, size), size) for size in sizes]
        self.kept: list[tuple[torch.Tensor, ...]] = []  # every earlier call's answer at kept_at

    def run(self, warmup: int, reps: int, unseen: int) -> None:
        runner = self.judge.runner
        assert runner is not None
        self.round_trip = runner.round_trip
        runner.freeze()  # the reference never runs beside the candidate's process
        n, total = len(self.prepared), warmup + reps
        rng = unpredictable.SYSTEM
        order = [s for _ in range(total // n + 1) for s in rng.sample(range(n), n)][:total]
        unseen_at = set(rng.sample(range(warmup, total), unseen))
        timed_calls = []
        for number in range(total):
            unseen_call = number in unseen_at
            item = self.unseen_instance() if unseen_call else self.contents_of(order[number])
            expected, reference_s = self.reference_call(item.instance)
            runner.thaw()
            shared, outputs, seconds = self.judge.call(item, number)  # frozen again on return
            where = f"call {number + 1}{' (an unseen instance)' if unseen_call else ''}"
            self.check(where, number, item, expected, shared, outputs)
            if number >= warmup:
                self.candidate.append(max(seconds, 1e-9))
                self.reference.append(reference_s)
                timed_calls.append(TimedCall(number, max(seconds, 1e-9), reference_s, unseen=unseen_call))
        check_unseen(timed_calls)

    def contents_of(self, s: int) -> Prepared:
        """Set s, freshly blended where the task allows it."""
        if self.contents is not None:
            self.judge.phase("reference")
            self.contents.blend(s, self.contents.draw(s))
        return self.prepared[s]

    def unseen_instance(self) -> Prepared:
        self.judge.phase("reference")
        seed = case_seed(self.seed, UNSEEN_TRIAL + self.unseen_made, 0)
        self.unseen_made += 1
        return placed_like(self.task, instantiate(self.task, self.task.perf_case, seed), self.prepared[0])

    def reference_call(self, instance: CaseInstance) -> tuple[tuple[torch.Tensor, ...], float]:
        """The reference on the device on the instance's current inputs: its outputs on the host and its time
        (flushed L2, the call, a synchronisation, the copy to the host)."""
        self.judge.phase("reference")
        tensors = list(instance.inputs.values())
        host = [tensor.data for tensor in tensors]
        try:
            for tensor in tensors:  # the bound reference reads device copies of this call's contents
                tensor.data = tensor.data.to(self.device.name)
            with torch.no_grad():
                self.flush.zero_()
                self.device.synchronize()
                started = time.perf_counter()
                outputs = instance.reference()
                self.device.synchronize()
                expected = tuple(output.detach().to("cpu", copy=True) for output in outputs)
                seconds = time.perf_counter() - started
        except Exception as exc:
            raise HarnessFailure(f"the reference of case {self.task.perf_case.name!r} failed on the device: "
                                 f"{type(exc).__name__}: {exc}") from exc
        finally:
            for tensor, data in zip(tensors, host, strict=True):
                tensor.data = data
        return expected, seconds

    def check(self, where: str, number: int, item: Prepared, expected: tuple[torch.Tensor, ...],
              shared: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        """The whole inputs unchanged and the whole outputs right, or the call's failure class."""
        self.judge.phase("compare")
        changed = inputs_modified(shared, item.inputs, list(item.instance.inputs))
        if changed:
            raise CheckFailed(Status.INPUT_MODIFIED, f"on {where} the kernel modified its inputs: {changed}")
        if not all(all_close(e, o, t) is True for e, o, t in zip(expected, outputs, item.tolerances, strict=True)):
            result = case_result(self.task.perf_case.name, number, 0, expected, outputs, item.tolerances,
                                 self.previous, custom=self.custom)
            if not result["passed"]:
                status = Status(result["status"])
                if status in (Status.WRONG_RESULT, Status.NAN_INF) and self.replayed(expected, outputs):
                    status = Status.CACHED_RESULT
                raise CheckFailed(status, f"on {where} of the performance case: {result['n_mismatch']} of "
                                          f"{result['n_elements']} elements wrong" + (
                                              " (the answer of an earlier call's inputs)"
                                              if status is Status.CACHED_RESULT else ""))
        self.previous = expected
        self.kept.append(tuple(gather(e, at) for e, at in zip(expected, self.kept_at, strict=True)))

    def replayed(self, expected: tuple[torch.Tensor, ...], outputs: list[torch.Tensor]) -> bool:
        """Do the outputs hold, at the kept positions, an earlier call's answer that is not this call's?"""
        tolerances = self.prepared[0].tolerances
        own = [gather(e, at) for e, at in zip(expected, self.kept_at, strict=True)]
        got = [gather(o, at) for o, at in zip(outputs, self.kept_at, strict=True)]
        for answer in self.kept:
            held = all(all_close(a, g, t) is True for a, g, t in zip(answer, got, tolerances, strict=True))
            if held and any(all_close(a, e, t) is not True for a, e, t in zip(answer, own, tolerances, strict=True)):
                return True
        return False

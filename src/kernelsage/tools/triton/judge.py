"""The judge of Triton candidates: the trusted side of verify (and of a device's profile). It makes inputs and
reference outputs, places the inputs in shared memory the runner maps read-only, poisons the outputs, asks
the sandboxed Python runner to call ks_kernel, freezes the sandbox and decides. It never loads candidate code.

The verdicts, the arena and the judge's core are the shared ones (`tools.judging`), as the cpu judge's; only the
runner differs (Python in the sandbox instead of ks_runner).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from kernelsage.tasks.model import Task
from kernelsage.tools.compare import poison
from kernelsage.tools.judging.arena import Arena, Placed
from kernelsage.tools.judging.core import Emit, HarnessFailure, JudgeCore, RunnerFailed
from kernelsage.tools.judging.instances import Prepared, case_seed, dtype_name, output_check, plan, reference
from kernelsage.tools.judging.verdicts import (
    arm_guards,
    case_result,
    failed_case,
    guard_breach,
    inputs_modified,
)
from kernelsage.tools.results import Status
from kernelsage.tools.triton.runner import PyRunner


def places(items: Sequence[Placed]) -> list[dict[str, Any]]:
    return [{"offset": p.offset, "dtype": dtype_name(p.dtype), "shape": list(p.shape)} for p in items]


def reply_failure(reply: dict[str, Any]) -> tuple[Status, str] | None:
    """None for the expected success; else the candidate's failure class and what it said."""
    if reply.get("ok") is True and len(reply) == 2:  # ok and the nonce, nothing else
        return None
    error = str(reply.get("error", ""))[-3000:]
    if reply.get("forbidden"):
        ops = ", ".join(str(op) for op in list(reply["forbidden"])[:5])
        return Status.FORBIDDEN, (f"ks_kernel computed with torch ({ops}): compute in @triton.jit kernels; torch "
                                  "may only allocate, view and copy memory")
    return Status.RUNTIME_ERROR, error or "the runner reported a failure"


class TritonJudge(JudgeCore):
    """One verify (or profile) job of a Triton candidate: its checked source and the Python runner."""

    runner: PyRunner | None

    def __init__(self, payload: dict[str, Any], emit: Emit) -> None:
        super().__init__(payload, emit)
        self.device = payload["device"]
        self.source = Path(payload["source"]).read_text(encoding="utf-8")
        if _sha256(self.source) != payload["source_sha256"]:  # what runs is what compile checked
            raise HarnessFailure(f"{payload['source']} changed since it was checked; compile the candidate again")

    def start(self, input_bytes: int, output_bytes: int) -> PyRunner:
        """A fresh runner over a fresh arena, with the candidate loaded (a load failure is the candidate's)."""
        self.stop()
        self.arena = Arena(input_bytes, output_bytes)
        self.phase("candidate")
        self.runner = PyRunner(device=self.device, kernel_source=self.source, arena=self.arena,
                               isolation=self.isolation, limits=self.limits, budget=self.budget,
                               log_path=Path.cwd() / "runner.log")
        reply, _ = self.runner.call({"op": "load"})
        failure = reply_failure(reply)
        if failure is not None:
            raise RunnerFailed(failure[0], "loading kernel.py failed: " + failure[1])
        return self.runner

    def call(self, item: Prepared, trial: int) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """Inputs written, outputs poisoned, one timed call; the shared views and the judge's time of the call
        (its round trip less the calibrated empty one). The runner is frozen on return."""
        assert self.arena is not None and self.runner is not None
        self.phase("harness")
        shared = [self.arena.inputs.tensor(p.offset, p.dtype, p.shape) for p in item.input_places]
        for view, tensor in zip(shared, item.inputs, strict=True):
            view.copy_(tensor)
        outputs = [self.arena.outputs.tensor(p.offset, p.dtype, p.shape) for p in item.output_places]
        for output in outputs:
            poison(output, trial)
        arm_guards(self.arena.outputs, item.output_places)
        self.phase("candidate")
        seconds = 0.0
        staged, _ = self.runner.call({"op": "stage", "inputs": places(item.input_places),
                                      "outputs": places(item.output_places), "attrs": dict(item.instance.attrs)})
        failure = reply_failure(staged)
        if failure is None:
            reply, seconds = self.runner.call({"op": "run"})
            failure = reply_failure(reply)
        self.runner.freeze()
        if failure is not None:
            raise RunnerFailed(*failure)
        return shared, outputs, max(seconds - self.runner.round_trip, 0.0)


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def verify(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """Every case, several trials of fresh inputs, one runner for all (so answers kept across calls show)."""
    judge = TritonJudge(payload, emit)
    previous: dict[str, tuple[torch.Tensor, ...]] = {}
    where = (task.cases[0].name, 0)
    try:
        for trial in range(payload["trials"]):
            judge.phase("reference")
            instances = [reference(task, case, case_seed(payload["seed"], trial, index))
                         for index, case in enumerate(task.cases)]
            prepared, input_bytes, output_bytes = plan(task, instances)
            arena = judge.arena
            if judge.runner is None or arena is None or input_bytes > arena.inputs.size \
                    or output_bytes > arena.outputs.size:
                where = (task.cases[0].name, trial)
                judge.start(input_bytes, output_bytes)
            if not _verify_trial(judge, task, trial, prepared, previous):
                break
    except RunnerFailed as failure:
        if not getattr(failure, "reported", False):  # the runner failed to start or to load the candidate
            emit({"kind": "case", "data": failed_case(*where, failure.status, failure.message)})
    finally:
        judge.stop()
    emit({"kind": "result", "data": {"done": True, "stderr_tail": judge.log_tail}})


def _verify_trial(judge: TritonJudge, task: Task, trial: int, prepared: list[Prepared],
                  previous: dict[str, tuple[torch.Tensor, ...]]) -> bool:
    """Run and judge every case of one trial; False when a case failed (later trials add nothing)."""
    for case, item in zip(task.cases, prepared, strict=True):
        judge.emit({"kind": "progress", "case": case.name, "trial": trial})
        try:
            shared, outputs, _ = judge.call(item, trial)
        except RunnerFailed as failure:
            judge.emit({"kind": "case", "data": failed_case(case.name, trial, failure.status, failure.message)})
            failure.reported = True  # type: ignore[attr-defined]
            raise
        judge.phase("compare")
        assert item.expected is not None
        changed = inputs_modified(shared, item.inputs, list(item.instance.inputs))
        assert judge.arena is not None
        breach = guard_breach(judge.arena.outputs, item.output_places)
        if changed:
            result = failed_case(case.name, trial, Status.INPUT_MODIFIED, f"the kernel modified its inputs: {changed}")
        elif breach:
            result = failed_case(case.name, trial, Status.RUNTIME_ERROR, breach)
        else:
            result = case_result(case.name, trial, 0, item.expected, outputs, item.tolerances,
                                 previous.get(case.name), custom=output_check(task, case))
        judge.phase("candidate")
        assert judge.runner is not None
        judge.runner.thaw()
        judge.emit({"kind": "case", "data": result})
        previous[case.name] = item.expected
        if not result["passed"]:
            return False
    return True

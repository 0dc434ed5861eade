"""The judge: the trusted side of verify and profile. It loads the task, makes inputs and reference outputs,
places the inputs in shared memory, asks the isolated runner to call the kernel, and decides.

The judge never loads candidate code. The runner has no access to the judge's memory, its reference outputs
or its event pipe; the judge reads the runner's replies as untrusted data. It reports the phase it is in,
so that a harness fault (a reference running out of memory or time) is blamed on the harness, not the
candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from kernelsage.tasks.model import Task
from kernelsage.tools.compare import poison
from kernelsage.tools.cpu.runner import Runner
from kernelsage.tools.cpu.sets import describe_set
from kernelsage.tools.judging.arena import Arena, Placed
from kernelsage.tools.judging.core import (
    Emit,
    HarnessFailure,
    JudgeCore,
    RunnerFailed,
    read_verified,
)
from kernelsage.tools.judging.instances import Prepared, case_seed, output_check, plan, reference
from kernelsage.tools.judging.verdicts import (
    arm_guards,
    case_result,
    failed_case,
    guard_breach,
    inputs_modified,
)
from kernelsage.tools.results import Status


class Judge(JudgeCore):
    """The trusted side of one cpu verify or profile job: the verified kernel library and ks_runner."""

    runner: Runner | None

    def __init__(self, payload: dict[str, Any], emit: Emit) -> None:
        super().__init__(payload, emit)
        self.library = read_verified(payload["library"], payload["library_sha256"], "kernel library")
        self.executable = read_verified(payload["runner"], payload["runner_sha256"], "kernel runner")

    def start(self, input_bytes: int, output_bytes: int) -> Runner:
        """A fresh runner over a fresh arena of at least these sizes."""
        self.stop()
        self.arena = Arena(input_bytes, output_bytes)
        self.phase("candidate")
        self.runner = Runner(executable=self.executable, library=self.library, arena=self.arena,
                             isolation=self.isolation, limits=self.limits, budget=self.budget,
                             log_path=Path.cwd() / "runner.log")
        return self.runner

    def write_inputs(self, prepared: Prepared) -> list[torch.Tensor]:
        """Copy the private inputs into the shared region; the shared views."""
        assert self.arena is not None
        views = [self.arena.inputs.tensor(p.offset, p.dtype, p.shape) for p in prepared.input_places]
        for view, tensor in zip(views, prepared.inputs, strict=True):
            view.copy_(tensor)
        return views

    def output_views(self, places: Sequence[Placed], slot_offset: int = 0) -> list[torch.Tensor]:
        assert self.arena is not None
        return [self.arena.outputs.tensor(slot_offset + p.offset, p.dtype, p.shape) for p in places]


def define_sets(runner: Runner, prepared: Sequence[Prepared]) -> None:
    for set_id, item in enumerate(prepared):
        try:
            description = describe_set(item.input_places, item.output_places, item.instance.attrs)
        except (TypeError, ValueError) as exc:
            raise HarnessFailure(f"the task's tensors do not fit the CPU kernel ABI: {exc}") from exc
        runner.define(set_id, description)


def verify(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """Every case, several trials of fresh inputs, one runner for all (so results cached across calls show)."""
    judge = Judge(payload, emit)
    previous: dict[str, tuple[torch.Tensor, ...]] = {}
    where = (task.cases[0].name, 0)
    try:
        for trial in range(payload["trials"]):
            where = (task.cases[0].name, trial)
            judge.phase("reference")
            instances = [reference(task, case, case_seed(payload["seed"], trial, index))
                         for index, case in enumerate(task.cases)]
            prepared, input_bytes, output_bytes = plan(task, instances)
            arena = judge.arena
            if judge.runner is None or arena is None or input_bytes > arena.inputs.size \
                    or output_bytes > arena.outputs.size:
                judge.start(input_bytes, output_bytes)
            assert judge.runner is not None
            judge.phase("candidate")
            define_sets(judge.runner, prepared)
            if not _verify_trial(judge, task, trial, prepared, previous):
                break
    except RunnerFailed as failure:
        if not getattr(failure, "reported", False):  # the runner failed to start or to take the sets
            emit({"kind": "case", "data": failed_case(*where, failure.status, failure.message)})
    finally:
        judge.stop()
    emit({"kind": "result", "data": {"done": True, "stderr_tail": judge.log_tail}})


def _verify_trial(judge: Judge, task: Task, trial: int, prepared: list[Prepared],
                  previous: dict[str, tuple[torch.Tensor, ...]]) -> bool:
    """Run and judge every case of one trial; False when a case failed (later trials add nothing)."""
    runner = judge.runner
    assert runner is not None
    passed = True
    for index, (case, item) in enumerate(zip(task.cases, prepared, strict=True)):
        judge.emit({"kind": "progress", "case": case.name, "trial": trial})
        judge.phase("harness")
        shared_inputs = judge.write_inputs(item)
        outputs = judge.output_views(item.output_places)
        for output in outputs:
            poison(output, trial)
        assert judge.arena is not None
        arm_guards(judge.arena.outputs, item.output_places)
        judge.phase("candidate")
        try:
            code, _ = runner.run(index)
            runner.freeze()
        except RunnerFailed as failure:
            judge.emit({"kind": "case", "data": failed_case(case.name, trial, failure.status, failure.message)})
            failure.reported = True  # type: ignore[attr-defined]
            raise
        judge.phase("compare")
        assert item.expected is not None
        changed = inputs_modified(shared_inputs, item.inputs, list(item.instance.inputs))
        breach = guard_breach(judge.arena.outputs, item.output_places)
        if changed:
            result = failed_case(case.name, trial, Status.INPUT_MODIFIED, f"the kernel modified its inputs: {changed}")
        elif breach:
            result = failed_case(case.name, trial, Status.RUNTIME_ERROR, breach)
        else:
            result = case_result(case.name, trial, code, item.expected, outputs, item.tolerances,
                                 previous.get(case.name), custom=output_check(task, case))
        judge.phase("candidate")
        runner.thaw()
        judge.emit({"kind": "case", "data": result})
        passed = passed and result["passed"]
        previous[case.name] = item.expected
    return passed

"""The judge: the trusted side of verify and profile. It loads the task, makes inputs and reference outputs,
places the inputs in shared memory, asks the isolated runner to call the kernel, and decides.

The judge never loads candidate code. The runner has no access to the judge's memory, its reference outputs
or its event pipe; the judge reads the runner's replies as untrusted data. It reports the phase it is in,
so that a harness fault (a reference running out of memory or time) is blamed on the harness, not the
candidate.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelsage.tasks.model import CaseInstance, Task, TestCase, Tolerance
from kernelsage.tools.compare import poison
from kernelsage.tools.cpu.arena import Arena, Placed, Planner, describe_set
from kernelsage.tools.cpu.runner import Budget, Runner, RunnerFailed, RunnerLimits
from kernelsage.tools.cpu.verdicts import OutputCheck, case_result, failed_case, inputs_modified
from kernelsage.tools.isolation import Isolation
from kernelsage.tools.results import Status

Emit = Callable[[dict[str, Any]], None]


class HarnessFailure(RuntimeError):
    """The task's reference or the harness failed: not the candidate's fault."""

    harness = True


def case_seed(seed: int, trial: int, case_index: int) -> int:
    """The generator seed of one instance: a keyed hash (BLAKE2b) of (trial, case) under the job's key.

    An instance's inputs give its seed away (torch's generator is MT19937: its state, hence its seed, can be
    rebuilt from its outputs); through a keyed hash that seed tells nothing about the job's key or about any
    other instance's seed, so no input set, unseen instance or trial can be predicted from the ones seen.
    """
    key = (seed % 2**256).to_bytes(32, "little")
    digest = hashlib.blake2b(f"{trial}:{case_index}".encode(), key=key, digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def read_verified(path: str, sha256: str, what: str) -> bytes:
    """The bytes of a file the trusted side built, if they still hash to what was recorded."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise HarnessFailure(f"the {what} {path} cannot be read ({exc}); compile the candidate again") from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise HarnessFailure(f"the {what} {path} changed since it was built (sha256 mismatch); compile again")
    return data


@dataclass
class Prepared:
    """One input set: the judge's private inputs, reference outputs and tolerances, and their shared places."""

    instance: CaseInstance
    inputs: list[torch.Tensor]  # private, contiguous
    expected: tuple[torch.Tensor, ...] | None
    tolerances: list[Tolerance]
    input_places: list[Placed]
    output_places: list[Placed]


def output_check(task: Task, case: TestCase) -> OutputCheck | None:
    """The task's own precision rule for this case, as (expected, actual) -> passed, where it has one."""
    check = task.custom_check
    if check is None:
        return None
    return lambda expected, actual: check(case, tuple(expected), tuple(actual))


def reference(task: Task, case: TestCase, seed: int) -> tuple[CaseInstance, tuple[torch.Tensor, ...]]:
    """A case's inputs and reference outputs (a failure is the harness's)."""
    instance = instantiate(task, case, seed)
    return instance, run_reference(instance, case)


def instantiate(task: Task, case: TestCase, seed: int) -> CaseInstance:
    try:
        return task.instantiate(case, seed)
    except Exception as exc:
        raise HarnessFailure(f"making the inputs of case {case.name!r} failed: {type(exc).__name__}: {exc}") from exc


def run_reference(instance: CaseInstance, case: TestCase) -> tuple[torch.Tensor, ...]:
    try:
        with torch.inference_mode():
            return instance.reference()
    except Exception as exc:
        raise HarnessFailure(f"the reference of case {case.name!r} failed: {type(exc).__name__}: {exc}") from exc


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc mallopt parameters


def keep_freed_memory() -> None:
    """Let this (short-lived) process keep the memory it frees: the reference allocates its outputs on every
    timed call, and memory handed back to the system and faulted in again would time page faults, unevenly."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_MAX, 0)
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)


class JudgeCore:
    """What every judge of a sandboxed runner holds: the limits and budget of its job, the phases the worker
    blames by, and the arena and runner it starts and stops (the cpu judge here, the triton one in
    tools/triton/judge.py)."""

    runner: Any

    def __init__(self, payload: dict[str, Any], emit: Emit) -> None:
        self.emit = emit
        self.payload = payload
        self.isolation = Isolation(**payload["isolation"])
        limits = payload["limits"]
        self.limits = RunnerLimits(wall_s=float(limits["wall_s"]), cpu_s=float(limits["cpu_s"]),
                                   memory_bytes=int(limits["memory_bytes"]), file_bytes=int(limits["file_bytes"]),
                                   threads=int(payload["threads"]))
        self.budget = Budget(self.limits.wall_s)
        self.arena: Arena | None = None
        self.runner = None
        self._phase = ""
        self.log_tail = ""
        torch.set_num_threads(self.limits.threads)
        keep_freed_memory()

    def phase(self, name: str) -> None:
        """Tell the worker what runs now: 'candidate' (its time and faults are the candidate's) or the harness's."""
        if name != self._phase:
            self._phase = name
            self.emit({"kind": "phase", "phase": name})

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.log_tail = self.runner.log_tail()
            self.runner = None
        if self.arena is not None:
            self.arena.close()
            self.arena = None


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


def plan(task: Task, instances: Sequence[tuple[CaseInstance, tuple[torch.Tensor, ...] | None]],
         outputs_like: tuple[torch.Tensor, ...] | None = None) -> tuple[list[Prepared], int, int]:
    """Places for every set's inputs (one after another) and outputs, and the sizes of both regions.

    With `outputs_like` (profile), every set's outputs take the same places relative to the slot a call
    names; otherwise (verify) each set's outputs have places of their own in one slot.
    """
    inputs_plan, outputs_plan = Planner(), Planner()
    prepared = []
    for instance, expected in instances:
        private = [tensor.contiguous() for tensor in instance.inputs.values()]
        like = expected if outputs_like is None else outputs_like
        assert like is not None
        if outputs_like is not None:
            outputs_plan = Planner()
        prepared.append(Prepared(
            instance=instance, inputs=private, expected=expected,
            tolerances=[task.tolerance(dtype_name(e.dtype)) for e in like],
            input_places=[inputs_plan.place(t.dtype, t.shape) for t in private],
            output_places=[outputs_plan.place(e.dtype, e.shape) for e in like]))
    return prepared, inputs_plan.size, outputs_plan.size


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
        if changed:
            result = failed_case(case.name, trial, Status.INPUT_MODIFIED, f"the kernel modified its inputs: {changed}")
        else:
            result = case_result(case.name, trial, code, item.expected, outputs, item.tolerances,
                                 previous.get(case.name), custom=output_check(task, case))
        judge.phase("candidate")
        runner.thaw()
        judge.emit({"kind": "case", "data": result})
        passed = passed and result["passed"]
        previous[case.name] = item.expected
    return passed

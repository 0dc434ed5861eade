"""A task's instances as the judge makes them: inputs from the task's generator under a seed derived by a keyed
hash of the job's key, the reference's outputs, and each set's private tensors with their places in the arena."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kernelsage.tasks.model import CaseInstance, Task, TestCase, Tolerance
from kernelsage.tools.judging.arena import Placed, Planner
from kernelsage.tools.judging.core import HarnessFailure
from kernelsage.tools.judging.verdicts import OutputCheck


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
        # no_grad rather than inference_mode: a reference may take gradients inside itself under enable_grad
        # (NPUKernelBench's GeGluGradV2), which tensors made in inference mode refuse
        with torch.no_grad():
            return instance.reference()
    except Exception as exc:
        raise HarnessFailure(f"the reference of case {case.name!r} failed: {type(exc).__name__}: {exc}") from exc


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


def placed_like(task: Task, instance: CaseInstance, like: Prepared) -> Prepared:
    """A new instance of the performance case at `like`'s input and output places (HarnessFailure if its inputs
    differ in dtype or shape: a set's place holds exactly its tensors)."""
    outputs = tuple(torch.empty(p.shape, dtype=p.dtype) for p in like.output_places)
    item = plan(task, [(instance, None)], outputs_like=outputs)[0][0]
    if [(t.dtype, t.shape) for t in item.inputs] != [(t.dtype, t.shape) for t in like.inputs]:
        raise HarnessFailure(f"the inputs of the performance case {task.perf_case.name!r} change shape with the seed")
    return dataclasses.replace(item, input_places=like.input_places, output_places=like.output_places)

"""A task's kernel interface, worked out without allocating its tensors.

Inputs in the order the kernel sees them, with dtypes and shapes, the outputs and the scalar attributes of
one test case. The reference runs on the meta device (shapes and dtypes only, no data, no compute), so a
suite's full-size cases (tens of GiB for some KernelBench tasks) are described in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from kernelsage.tasks.model import Task, TestCase

SMALL_CASE_BYTES = 16 << 20  # a case without a meta implementation is run for real only below this


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]

    def describe(self) -> str:
        return f"{self.name}: {self.dtype} {list(self.shape)}"


@dataclass(frozen=True)
class CaseInterface:
    """What the kernel receives and must write for one test case."""

    case: str
    inputs: tuple[TensorSpec, ...] | None  # None: could not be worked out (see `note`)
    attrs: dict[str, Any]
    outputs: tuple[TensorSpec, ...] | None  # None: could not be worked out (see `note`)
    note: str = ""

    def describe(self) -> str:
        lines = [f"case {self.case}:"]
        if self.inputs is None:
            return "\n".join([*lines, f"  unknown ({self.note})"])
        lines += [f"  inputs[{i}] {spec.describe()}" for i, spec in enumerate(self.inputs)]
        if self.outputs is None:
            lines.append(f"  outputs: unknown ({self.note})")
        else:
            lines += [f"  outputs[{i}]: {spec.dtype} {list(spec.shape)}" for i, spec in enumerate(self.outputs)]
        lines += [f"  attr {name} = {value!r}" for name, value in self.attrs.items()]
        return "\n".join(lines)



def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _specs(tensors: dict[str, torch.Tensor] | tuple[torch.Tensor, ...]) -> tuple[TensorSpec, ...]:
    items = tensors.items() if isinstance(tensors, dict) else ((f"outputs[{i}]", t) for i, t in enumerate(tensors))
    return tuple(TensorSpec(name, _dtype(t), tuple(t.shape)) for name, t in items)


def case_interface(task: Task, case: TestCase) -> CaseInterface:
    """The interface of one case, worked out on the meta device. Nothing is ever computed on real data
    here for a large case (this runs in the agent's process, and a case may need tens of GiB): where an
    operator has no meta implementation, a small case is run on the CPU, and a large one's outputs (or, if
    its inputs cannot be built either, the whole case) are reported unknown with the reason; the reference
    code in the task's description tells the rest."""
    try:
        with torch.device("meta"):
            instance = task.instantiate(case, 0)
            inputs, attrs = _specs(instance.inputs), dict(instance.attrs)
    except Exception as exc:
        return CaseInterface(case.name, None, {}, None,
                             note=f"the case cannot be built without data: {_reason(exc)}")
    try:
        with torch.device("meta"):
            outputs = _specs(instance.reference())
    except Exception as exc:
        outputs = _small_case_outputs(task, case, inputs)
        if outputs is None:
            return CaseInterface(case.name, inputs, attrs, None,
                                 note=f"the reference has no shape-only run: {_reason(exc)}")
    return CaseInterface(case.name, inputs, attrs, outputs)


def _small_case_outputs(task: Task, case: TestCase, inputs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...] | None:
    """The outputs of a case too small to matter (all inputs within SMALL_CASE_BYTES), run on the CPU; None
    for anything larger, and for cases drawn from input groups (drawing one draws them all)."""
    size = sum(math.prod(spec.shape) * getattr(torch, spec.dtype).itemsize for spec in inputs)
    if size > SMALL_CASE_BYTES or "group" in case.params:
        return None
    try:
        instance = task.instantiate(case, 0)
        with torch.inference_mode():
            return _specs(instance.reference())
    except Exception:
        return None


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"

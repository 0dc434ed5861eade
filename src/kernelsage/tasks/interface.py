"""A task's kernel interface, worked out without allocating its tensors.

Inputs in the order the kernel sees them, with dtypes and shapes, the outputs and the scalar attributes of
one test case. The reference runs on the meta device (shapes and dtypes only, no data, no compute), so a
suite's full-size cases (tens of GiB for some KernelBench tasks) are described in milliseconds. Where an
operator has no meta implementation, the case is run on the CPU only if its inputs are small; otherwise the
outputs are reported as unknown with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelsage.tasks.model import Task, TestCase

CPU_FALLBACK_BYTES = 64 << 20  # run a case without a meta implementation on the CPU only below this size


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=getattr(torch, self.dtype)).element_size()

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
    params: dict[str, Any] = field(default_factory=dict)

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

    def to_dict(self) -> dict[str, Any]:
        def specs(items: tuple[TensorSpec, ...] | None) -> list[dict[str, Any]] | None:
            return None if items is None else [{"name": s.name, "dtype": s.dtype, "shape": list(s.shape)} for s in items]

        return {"case": self.case, "inputs": specs(self.inputs), "outputs": specs(self.outputs),
                "attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in self.attrs.items()},
                "note": self.note}


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _specs(tensors: dict[str, torch.Tensor] | tuple[torch.Tensor, ...]) -> tuple[TensorSpec, ...]:
    items = tensors.items() if isinstance(tensors, dict) else ((f"outputs[{i}]", t) for i, t in enumerate(tensors))
    return tuple(TensorSpec(name, _dtype(t), tuple(t.shape)) for name, t in items)


def case_interface(task: Task, case: TestCase) -> CaseInterface:
    """The interface of one case: on the meta device, else on the CPU for a small case, else partial."""
    try:
        with torch.device("meta"):
            instance = task.instantiate(case, 0)
            inputs = _specs(instance.inputs)
            outputs = _specs(instance.reference())
        return CaseInterface(case.name, inputs, dict(instance.attrs), outputs, params=dict(case.params))
    except Exception as exc:
        meta_error = f"{type(exc).__name__}: {exc}"
    try:
        with torch.device("meta"):
            instance = task.instantiate(case, 0)
        inputs = _specs(instance.inputs)
    except Exception:
        return CaseInterface(case.name, None, {}, None, params=dict(case.params),
                             note=f"the case cannot be built without data ({meta_error[:200]})")
    if sum(spec.nbytes for spec in inputs) > CPU_FALLBACK_BYTES:
        return CaseInterface(case.name, inputs, dict(instance.attrs), None, params=dict(case.params),
                             note=f"the reference has no shape-only run ({meta_error[:200]}) and the inputs are "
                                  f"too large to run it here")
    instance = task.instantiate(case, 0)
    with torch.inference_mode():
        outputs = _specs(instance.reference())
    return CaseInterface(case.name, _specs(instance.inputs), dict(instance.attrs), outputs, params=dict(case.params))


def task_interfaces(task: Task, limit: int | None = None) -> list[CaseInterface]:
    """The interface of every case (or the first `limit`), the performance case always among them."""
    cases = list(task.cases if limit is None else task.cases[:limit])
    if task.perf_case not in cases:
        cases.append(task.perf_case)
    return [case_interface(task, case) for case in cases]

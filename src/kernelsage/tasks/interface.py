"""A task's kernel interface, worked out without allocating its tensors.

Inputs in the order the kernel sees them, with dtypes and shapes, the outputs and the scalar attributes of
one test case. The reference runs on the meta device (shapes and dtypes only, no data, no compute), so a
suite's full-size cases (tens of GiB for some KernelBench tasks) are described in milliseconds.

An operator on the meta device is not free, though: PyTorch works most of them out in Python, a tenth of a
millisecond to a millisecond each, against microseconds on the CPU for a small tensor. A reference that
loops in Python over slices (NPUKernelBench's GroupNormSwishGrad: batch x groups iterations of some 40
operators) or an RNN layer (decomposed into a few operators per time step) takes minutes there, so a meta
run stops after META_OP_LIMIT operators and the case is treated as one without a shape-only run: a small
case runs on the CPU instead, a large one's outputs are reported unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsage.tasks.loaders.npu_standin import NpuUnavailable
from kernelsage.tasks.model import Task, TestCase

SMALL_CASE_BYTES = 16 << 20  # a case without a meta implementation is run for real only below this
# Operators (as dispatched, after decomposition) a reference may run on the meta device. The largest networks
# of the three suites run under 2,000 (KernelBench level 3: VanillaRNNHidden 1,794, DenseNet201 621,
# ResNet101 555); a per-slice Python loop or an LSTM runs tens of thousands (KernelBench's 35_LSTM: 46,104).
META_OP_LIMIT = 4096


class MetaOpLimit(RuntimeError):
    """A reference ran more operators on the meta device than META_OP_LIMIT."""


class _OpBudget(TorchDispatchMode):
    """Counts the operators dispatched inside it and stops the run past `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.left = limit

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.left -= 1
        if self.left < 0:
            raise MetaOpLimit(f"over {META_OP_LIMIT} operators on shapes alone (a Python loop or a recurrent "
                              "layer), too slow on the meta device")
        return func(*args, **(kwargs or {}))


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
    error: str = ""  # the reference fails for sure (an NPU-only operator, or a failed run of a small case)

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
        """JSON-ready: shapes as lists, unknown parts as null with the note saying why."""
        def specs(items: tuple[TensorSpec, ...] | None) -> list[dict[str, Any]] | None:
            return None if items is None else [{"name": s.name, "dtype": s.dtype, "shape": list(s.shape)}
                                                for s in items]

        return {"case": self.case, "inputs": specs(self.inputs), "outputs": specs(self.outputs),
                "attrs": dict(self.attrs), "note": self.note, "error": self.error}


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
    code in the task's description tells the rest. `error` says when the reference fails for sure."""
    try:
        with torch.device("meta"):
            instance = task.instantiate(case, 0)
            inputs, attrs = _specs(instance.inputs), dict(instance.attrs)
    except Exception as exc:
        return CaseInterface(case.name, None, {}, None, note=f"the case cannot be built without data: "
                             f"{_reason(exc)}", error=_reason(exc) if isinstance(exc, NpuUnavailable) else "")
    try:
        with torch.device("meta"), _OpBudget(META_OP_LIMIT):
            outputs = _specs(instance.reference())
    except Exception as exc:
        if isinstance(exc, NpuUnavailable):
            return CaseInterface(case.name, inputs, attrs, None, note=_reason(exc), error=_reason(exc))
        small, error = _small_case_outputs(task, case, inputs)
        if small is None:
            return CaseInterface(case.name, inputs, attrs, None, error=error,
                                 note=f"the reference has no shape-only run: {_reason(exc)}")
        outputs = small
    return CaseInterface(case.name, inputs, attrs, outputs)


def task_runs(task: Task) -> tuple[list[dict[str, Any]], str | None]:
    """Every case as it would run (its parameters, dtype and interface, JSON-ready), and why the task cannot
    run at all, if it cannot: no cases, a reference that fails for sure, or a small case (`small_case_error`,
    the only ones built with data here) whose inputs or reference fail on the CPU."""
    if not task.cases:
        return [], "the task has no test cases"
    cases: list[dict[str, Any]] = []
    problem = None
    for case in task.cases:
        interface = case_interface(task, case)
        cases.append({**interface.to_dict(), "params": dict(case.params), "dtype": case.dtype})
        error = interface.error or small_case_error(task, case, interface)
        if error and problem is None:
            problem = f"case {case.name}: {error}"
    return cases, problem


def small_case_error(task: Task, case: TestCase, interface: CaseInterface) -> str:
    """Why a small case (inputs within SMALL_CASE_BYTES) fails when built and run on the CPU for real (its
    inputs or its reference), or '' when it runs, or is larger, or its size is unknown."""
    if interface.inputs is None or tensor_bytes(interface.inputs) > SMALL_CASE_BYTES or "group" in case.params:
        return ""
    try:
        instance = task.instantiate(case, 0)
    except Exception as exc:
        return f"its inputs cannot be made on the CPU: {_reason(exc)}"
    try:
        with torch.inference_mode():
            instance.reference()
    except Exception as exc:
        return f"the reference fails on the CPU: {_reason(exc)}"
    return ""


def tensor_bytes(specs: tuple[TensorSpec, ...]) -> int:
    """The bytes these tensors take (shapes times element sizes)."""
    return sum(math.prod(spec.shape) * getattr(torch, spec.dtype).itemsize for spec in specs)


def _small_case_outputs(task: Task, case: TestCase,
                        inputs: tuple[TensorSpec, ...]) -> tuple[tuple[TensorSpec, ...] | None, str]:
    """The outputs of a case too small to matter (all inputs within SMALL_CASE_BYTES), run on the CPU, or
    None and why the run failed (''  where it was not tried: a larger case, or one drawn from input groups,
    where drawing one draws them all)."""
    if tensor_bytes(inputs) > SMALL_CASE_BYTES or "group" in case.params:
        return None, ""
    try:
        instance = task.instantiate(case, 0)
        with torch.inference_mode():
            return _specs(instance.reference()), ""
    except Exception as exc:
        return None, f"the reference fails on the CPU: {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"

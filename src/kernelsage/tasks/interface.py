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

Besides the flat inputs and outputs the kernel ABIs use, an interface keeps the structure the suite's
reference has: its arguments as the suite passes them (a list of tensors, an optional input passed as None)
and the structure of what it returns (a tuple, a list), shown where it is not one tensor per argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsage.tasks.model import ATTR, NONE, TENSOR, TENSORS, CaseInstance, Task, TestCase, as_outputs
from kernelsage.tasks.npu_unavailable import NpuUnavailable

SMALL_CASE_BYTES = 16 << 20  # a case without a meta implementation is run for real only below this
# Where building one case draws more (MultiKernelBench's input groups: all of them at once), that draw is made
# on the CPU, when the meta device cannot, only below this (Task.draw_bytes, as the suite's files declare it).
DRAW_BYTES = 256 << 20
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
class ArgumentSpec:
    """One argument of the suite's reference (forward's, in order) and where it lands in the flat view: the
    indexes of its tensors among the kernel's inputs, or the attribute it became."""

    name: str
    kind: str  # model.TENSOR | TENSORS | NONE | ATTR | OTHER
    inputs: tuple[int, ...] = ()  # indexes into CaseInterface.inputs
    attr: str = ""  # the attribute's name, for ATTR

    def describe(self, specs: tuple[TensorSpec, ...], attrs: dict[str, Any]) -> str:
        tensors = [specs[i] for i in self.inputs]
        at = _index_range("inputs", self.inputs)
        if self.kind == TENSOR and tensors:
            return f"{self.name}: {tensors[0].dtype} {list(tensors[0].shape)} = {at}"
        if self.kind == TENSORS:
            dtypes = sorted({t.dtype for t in tensors})
            shapes = ", ".join(str(list(t.shape)) for t in tensors)
            return f"{self.name}: list of {len(tensors)} {'/'.join(dtypes)} tensors {shapes} = {at}"
        if self.kind == NONE:
            return f"{self.name}: None (an optional input this case leaves out; the kernel receives nothing for it)"
        if self.kind == ATTR:
            return f"{self.name}: {attrs.get(self.attr)!r} = attr {self.attr}"
        return f"{self.name}: a value no kernel ABI carries (not passed to the kernel)"


@dataclass(frozen=True)
class CaseInterface:
    """What the kernel receives and must write for one test case: the flat inputs and outputs of the kernel
    ABIs, and (where known) the structure of the suite's reference, its arguments and what it returns."""

    case: str
    inputs: tuple[TensorSpec, ...] | None  # None: could not be worked out (see `note`)
    attrs: dict[str, Any]
    outputs: tuple[TensorSpec, ...] | None  # None: could not be worked out (see `note`)
    note: str = ""
    error: str = ""  # the reference fails for sure (an NPU-only operator, or a failed run of a small case)
    arguments: tuple[ArgumentSpec, ...] = ()  # the reference's arguments, where the loader knows them
    returns: Any = None  # the structure of what it returns (`return_layout`), where known

    def structured(self) -> bool:
        """Whether the reference's arguments are more than one tensor or attribute each (a list, a None)."""
        return any(argument.kind not in (TENSOR, ATTR) for argument in self.arguments)

    def describe(self) -> str:
        lines = [f"case {self.case}:"]
        if self.inputs is None:
            return "\n".join([*lines, f"  unknown ({self.note})"])
        if self.structured():
            lines.append("  the reference's arguments, as the suite passes them:")
            lines += [f"    [{i}] {argument.describe(self.inputs, self.attrs)}"
                      for i, argument in enumerate(self.arguments)]
            lines.append("  the kernel's inputs, flat:")
        lines += [f"  inputs[{i}] {spec.describe()}" for i, spec in enumerate(self.inputs)]
        if self.outputs is None:
            lines.append(f"  outputs: unknown ({self.note})")
        else:
            lines += [f"  outputs[{i}]: {spec.dtype} {list(spec.shape)}" for i, spec in enumerate(self.outputs)]
            if self.returns is not None and not isinstance(self.returns, int):
                lines.append(f"  the reference returns {describe_layout(self.returns)}")
        lines += [f"  attr {name} = {value!r}" for name, value in self.attrs.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: shapes as lists, unknown parts as null with the note saying why."""
        def specs(items: tuple[TensorSpec, ...] | None) -> list[dict[str, Any]] | None:
            return None if items is None else [{"name": s.name, "dtype": s.dtype, "shape": list(s.shape)}
                                                for s in items]

        arguments = [{"name": a.name, "kind": a.kind, "inputs": list(a.inputs), "attr": a.attr or None}
                     for a in self.arguments]
        return {"case": self.case, "inputs": specs(self.inputs), "outputs": specs(self.outputs),
                "attrs": dict(self.attrs), "note": self.note, "error": self.error, "arguments": arguments,
                "returns": self.returns}


def return_layout(value: Any) -> Any:
    """The structure of a reference's return value over its flat outputs (`model.as_outputs` order),
    JSON-ready: a tensor is its output index, a Python number `{"scalar": index}`, a tuple or list
    `{"tuple": [...]}` / `{"list": [...]}` of its items' layouts."""
    counter = iter(range(1 << 30))

    def walk(item: Any) -> Any:
        if isinstance(item, (tuple, list)):
            return {"list" if isinstance(item, list) else "tuple": [walk(i) for i in item]}
        return next(counter) if isinstance(item, torch.Tensor) else {"scalar": next(counter)}

    return walk(value)


def describe_layout(layout: Any) -> str:
    """'a tuple of 3 tensors = outputs[0..2]', 'a tuple of 2: outputs[0], a list of 2 tensors = outputs[1..2]'."""
    if isinstance(layout, int):
        return f"outputs[{layout}]"
    if "scalar" in layout:
        return f"a Python number = outputs[{layout['scalar']}] (0-dim)"
    (kind, items), = layout.items()
    if items and all(isinstance(item, int) for item in items):
        return f"a {kind} of {len(items)} tensor{'s' if len(items) != 1 else ''} = {_index_range('outputs', items)}"
    return f"a {kind} of {len(items)}: " + ", ".join(describe_layout(item) for item in items)


def _index_range(name: str, indexes: tuple[int, ...] | list[int]) -> str:
    if len(indexes) > 1 and list(indexes) == list(range(indexes[0], indexes[-1] + 1)):
        return f"{name}[{indexes[0]}..{indexes[-1]}]"
    return ", ".join(f"{name}[{i}]" for i in indexes) or "nothing"


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
        on_meta = True
    except Exception as exc:
        if isinstance(exc, NpuUnavailable) or not cheap_on_cpu(task, case, None):
            return CaseInterface(case.name, None, {}, None, note=f"the case cannot be built without data: "
                                 f"{_reason(exc)}", error=_reason(exc) if isinstance(exc, NpuUnavailable) else "")
        try:  # its draw is small (Task.draw_bytes): made on the CPU
            instance, on_meta = task.instantiate(case, 0), False
        except Exception as cpu_exc:
            return CaseInterface(case.name, None, {}, None, error=f"its inputs cannot be made on the CPU: "
                                 f"{_reason(cpu_exc)}", note=f"the case cannot be built: {_reason(cpu_exc)}")
    inputs, attrs, arguments = _specs(instance.inputs), dict(instance.attrs), _arguments(instance)
    note = "its inputs were drawn on the CPU, and they are too large to run the reference there"
    if on_meta:
        try:
            with torch.device("meta"), _OpBudget(META_OP_LIMIT):
                value = _returned(instance)
                return _described(case, instance, inputs, arguments, value)
        except NpuUnavailable as exc:
            return CaseInterface(case.name, inputs, attrs, None, note=_reason(exc), error=_reason(exc),
                                 arguments=arguments)
        except Exception as exc:
            note = f"the reference has no shape-only run: {_reason(exc)}"
    ran, value, error = _small_case_returned(task, case, inputs, None if on_meta else instance)
    if not ran:
        return CaseInterface(case.name, inputs, attrs, None, error=error, arguments=arguments, note=note)
    return _described(case, instance, inputs, arguments, value)


def _described(case: TestCase, instance: CaseInstance, inputs: tuple[TensorSpec, ...],
               arguments: tuple[ArgumentSpec, ...], value: Any) -> CaseInterface:
    returns = return_layout(value) if instance.returned is not None else None
    return CaseInterface(case.name, inputs, dict(instance.attrs), _specs(as_outputs(value)), arguments=arguments,
                         returns=returns)


def describe_interface(task: Task, case: TestCase | None = None) -> str:
    """The kernel ABI view of one case (default: the first): inputs, outputs and attributes in the order the
    kernel sees them, with the reference's own structure where it has one, worked out without allocating the
    case's tensors (`case_interface`)."""
    return case_interface(task, case or task.cases[0]).describe()


def _arguments(instance: CaseInstance) -> tuple[ArgumentSpec, ...]:
    position = {name: i for i, name in enumerate(instance.inputs)}
    return tuple(ArgumentSpec(argument.name, argument.kind,
                              tuple(position[name] for name in argument.names if name in position),
                              argument.names[0] if argument.kind == ATTR else "")
                 for argument in instance.arguments)


def _returned(instance: CaseInstance) -> Any:
    return instance.returned() if instance.returned is not None else instance.reference()


def cheap_on_cpu(task: Task, case: TestCase, inputs: tuple[TensorSpec, ...] | None) -> bool:
    """Whether building and running the case for real on the CPU is cheap: its inputs (where known) within
    SMALL_CASE_BYTES, and where building it draws more than the case (input groups: all at once), that draw
    within DRAW_BYTES as the suite's files declare it; a case of unknown size only then."""
    if "group" in case.params:
        if task.draw_bytes is None or task.draw_bytes > DRAW_BYTES:
            return False
    elif inputs is None:
        return False
    return inputs is None or tensor_bytes(inputs) <= SMALL_CASE_BYTES


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
    """Why a small case (`cheap_on_cpu`) fails when built and run on the CPU for real (its inputs or its
    reference), or '' when it runs, or is larger, or its size is unknown."""
    if interface.inputs is None or not cheap_on_cpu(task, case, interface.inputs):
        return ""
    try:
        instance = task.instantiate(case, 0)
    except Exception as exc:
        return f"its inputs cannot be made on the CPU: {_reason(exc)}"
    try:
        with torch.no_grad():
            instance.reference()
    except Exception as exc:
        return f"the reference fails on the CPU: {_reason(exc)}"
    return ""


def tensor_bytes(specs: tuple[TensorSpec, ...]) -> int:
    """The bytes these tensors take (shapes times element sizes)."""
    return sum(math.prod(spec.shape) * getattr(torch, spec.dtype).itemsize for spec in specs)


def _small_case_returned(task: Task, case: TestCase, inputs: tuple[TensorSpec, ...],
                         instance: CaseInstance | None) -> tuple[bool, Any, str]:
    """Whether the reference ran for a case cheap enough to run on the CPU (`cheap_on_cpu`), built there (or
    the `instance` already built there), what it returned, and why it failed ('' where it was not tried)."""
    if not cheap_on_cpu(task, case, inputs):
        return False, None, ""
    try:
        instance = instance or task.instantiate(case, 0)
        with torch.no_grad():
            value = _returned(instance)
        as_outputs(value)  # tensors, or what no kernel could write (a TypeError, as the judge would raise)
        return True, value, ""
    except Exception as exc:
        return False, None, f"the reference fails on the CPU: {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"

"""Scaling a suite's shapes down to a byte budget, so that suites written for a GPU or an NPU fit a CPU.

A case's shape parameters are the integers in its parameters: NPUKernelBench's CSV cells (shape strings such
as `[32, 1024]` and scalar columns such as `m`), the module-level sizes a KernelBench file's `get_inputs()` and
`get_init_inputs()` read (`batch_size`, `dim`, ...). The rule, deterministic and recorded with the task:

- the case's size is the bytes of its inputs and outputs, worked out on the meta device (no data);
- while it exceeds the budget, the largest integer of at least MIN_SCALED_DIM is halved, everywhere it occurs
  in the case (a size shared by two tensors stays shared; sizes that only become equal on the way stay apart),
  and kept only if the case still builds and its inputs shrink (and, once it is small, still runs on the CPU:
  a count such as `n = 262144` next to a halved shape breaks indexing that the meta device cannot see); a size
  whose halving breaks the case is left alone from then on;
- integers below MIN_SCALED_DIM (kernel sizes, strides, axes, small channel counts) are never changed;
- cases defined by input groups (MultiKernelBench's JSON cases) cannot be rescaled: those over the budget are
  left out, and where none fits, the smallest one is kept.

The outcome is a `Scaling`: per kept case, which values became which. `TaskOrigin.scaling` carries it, so the
sandbox's worker rebuilds exactly the same cases (`apply_scaling`), and the stream records them.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.tasks.interface import CaseInterface, case_interface, small_case_error, tensor_bytes
from kernelsage.tasks.model import Task, TestCase
from kernelsage.tasks.scaled_cases import CaseScaling, Scaling, format_bytes

MIN_SCALED_DIM = 16  # smaller integers are kernel sizes, strides, axes: never scaled
NOT_SHAPES = frozenset({"case_id", "group", "seed"})  # parameters that are never sizes
MAX_STEPS = 256  # halvings per case (a 2**60-element case needs 60 at most)

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}


def parse_bytes(text: str | int) -> int:
    """'64MiB', '1.5GiB', '500MB', '1048576' -> bytes (MiB/GiB binary, MB/GB decimal)."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    size = int(float(match.group(1)) * _UNITS[unit]) if match and unit in _UNITS else 0
    if size < 1:
        raise ConfigurationError(f"shape budget {text!r}: give a size of at least one byte such as 64MiB, 2GiB "
                                 "or 500MB")
    return size


# Finding and replacing the integers of a case's parameters -------------------------------------------------

def _literal(value: Any) -> Any:
    """A shape string ('[32, 1024]') as its value; anything else unchanged (None for other strings)."""
    if isinstance(value, str):
        try:
            return ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return value


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [i for item in value for i in _ints(item)]
    return []


def shape_values(params: Mapping[str, Any]) -> list[int]:
    """The distinct integers of at least MIN_SCALED_DIM in a case's parameters, largest first."""
    found = {i for name, value in params.items() if name not in NOT_SHAPES for i in _ints(_literal(value))}
    return sorted((i for i in found if i >= MIN_SCALED_DIM), reverse=True)


def _replace(value: Any, mapping: Mapping[int, int]) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return mapping.get(value, value)
    if isinstance(value, (list, tuple)):
        return type(value)(_replace(item, mapping) for item in value)
    return value


def replace_values(params: Mapping[str, Any], mapping: Mapping[int, int]) -> dict[str, Any]:
    """The parameters with each integer in `mapping` replaced, also inside shape strings (rewritten as the
    Python literal they hold, which is what the suites' `eval()` reads)."""
    replaced: dict[str, Any] = {}
    for name, value in params.items():
        if name in NOT_SHAPES:
            replaced[name] = value
        elif isinstance(value, str):
            parsed = _literal(value)
            replaced[name] = repr(_replace(parsed, mapping)) if _ints(parsed) else value
        else:
            replaced[name] = _replace(value, mapping)
    return replaced


def scaled_case(case: TestCase, values: tuple[tuple[int, int], ...] | dict[int, int]) -> TestCase:
    mapping = dict(values)
    return case if not mapping else dataclasses.replace(case, params=replace_values(case.params, mapping))


# Sizes ------------------------------------------------------------------------------------------------------

def interface_bytes(interface: CaseInterface) -> int | None:
    """Inputs plus outputs (inputs alone where the outputs are unknown); None where the inputs are unknown."""
    if interface.inputs is None:
        return None
    return tensor_bytes(interface.inputs) + (tensor_bytes(interface.outputs) if interface.outputs else 0)


def case_bytes(task: Task, case: TestCase) -> int | None:
    return interface_bytes(case_interface(task, case))


def _sizes(task: Task, case: TestCase, *, run_small: bool = False) -> tuple[int, int] | None:
    """(input bytes, input and output bytes); None where the inputs are unknown, or where `run_small` and the
    case is small enough to run on the CPU and fails there (a scaled size that breaks the operator's indexing,
    which the meta device cannot see). Only the inputs show whether a step shrank the case: outputs may become
    known on the way (a small case runs on the CPU)."""
    interface = case_interface(task, case)
    if interface.inputs is None or interface.error or (run_small and small_case_error(task, case, interface)):
        return None
    inputs = tensor_bytes(interface.inputs)
    return inputs, inputs + tensor_bytes(interface.outputs or ())


# Fitting ----------------------------------------------------------------------------------------------------

def fit_case(task: Task, case: TestCase, budget: int) -> CaseScaling:
    """Halve the case's largest sizes until its inputs and outputs fit `budget` bytes (see the module doc)."""
    sizes = _sizes(task, case)
    if sizes is None:
        return CaseScaling(case.name, note="its size cannot be worked out without data: not scaled")
    before, current, frozen = sizes[1], {v: v for v in shape_values(case.params)}, set()
    for _ in range(MAX_STEPS):
        if sizes[1] <= budget:
            break
        candidates = [(new, old) for old, new in current.items() if new >= MIN_SCALED_DIM and old not in frozen]
        if not candidates:
            break
        _, largest = max(candidates)  # the largest size now (of equals, the one that was largest)
        trial = {**current, largest: current[largest] // 2}
        trial_sizes = _sizes(task, scaled_case(case, _changed(trial)), run_small=True)
        if trial_sizes is None or trial_sizes[0] >= sizes[0]:
            frozen.add(largest)
            continue
        current, sizes = trial, trial_sizes
    note = "" if sizes[1] <= budget else f"the smallest size reached is {format_bytes(sizes[1])}, over the budget"
    return CaseScaling(case.name, _changed(current), before, sizes[1], note)


def _changed(mapping: Mapping[int, int]) -> tuple[tuple[int, int], ...]:
    return tuple(sorted(((old, new) for old, new in mapping.items() if old != new), reverse=True))


def fit_task(task: Task, budget: int) -> Scaling:
    """Every case of the task fitted to the budget (input-group cases kept or left out, never rescaled)."""
    fitted: list[CaseScaling] = []
    over: list[CaseScaling] = []  # input groups over the budget
    for case in task.cases:
        if "group" not in case.params:
            fitted.append(fit_case(task, case, budget))
            continue
        size = case_bytes(task, case)
        if size is not None and size > budget:
            note = f"{format_bytes(size)}: an input group cannot be rescaled"
            over.append(CaseScaling(case.name, (), size, size, note))
        else:
            fitted.append(CaseScaling(case.name, (), size, size))
    if over and not fitted:  # none fits: the smallest one stays, with its note
        fitted.append(min(over, key=lambda c: c.bytes_after or 0))
    order = {case.name: i for i, case in enumerate(task.cases)}
    fitted.sort(key=lambda c: order[c.case])
    names = {c.case for c in fitted}
    perf = task.perf_case.name if task.perf_case.name in names else max(
        fitted, key=lambda c: c.bytes_after or 0).case
    return Scaling(budget=budget, cases=tuple(fitted), perf_case=perf,
                   dropped=tuple(c.case for c in over if c.case not in names))


def apply_scaling(task: Task, scaling: Scaling) -> Task:
    """The task with the scaled cases only (as recorded), the recorded performance case, and the scaling in
    its origin so that a worker loading it again gets the same cases."""
    by_name = {case.name: case for case in task.cases}
    missing = [c.case for c in scaling.cases if c.case not in by_name]
    if missing:
        raise ConfigurationError(f"task {task.id}: the recorded scaling names unknown cases {missing}")
    cases = tuple(scaled_case(by_name[c.case], c.values) for c in scaling.cases)
    perf = next(case for case in cases if case.name == scaling.perf_case)
    origin = dataclasses.replace(task.origin, scaling=scaling) if task.origin else None
    return dataclasses.replace(task, cases=cases, perf_case=perf, origin=origin)


def scale_task(task: Task, budget: int) -> Task:
    """`task` with its cases fitted to `budget` bytes (see the module doc)."""
    return apply_scaling(task, fit_task(task, budget))
